package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/store/offsets"
	"github.com/rocketstore/engine/internal/store/subjecttags"
)

// The files of <store>/config that the engine must read to start (and an offline read, for the
// subject tags): one that neither it nor its .bak backup decodes makes every start refuse, so
// verify reports it as damage, with the way out (the loaders' errors say it). repair does not
// touch them (ErrNotRepairable says what to do by hand).

// configCheck is one config file: how to load it, what refuses to work without it, and what to
// do with it when neither it nor its backup decodes.
type configCheck struct {
	name    string
	load    func(v *verifier) error
	refuses string
	wayOut  string // "" when load's error says it
}

var configChecks = []configCheck{
	{
		name: subjecttags.FileName,
		load: func(v *verifier) error {
			_, err := subjecttags.Load(v.ro, v.opts.Dir) // its error says the way out
			return err
		},
		refuses: "every start of the engine and every offline read refuse the store",
	},
	{
		name: meta.ConsumerOffsetFileName, // and its journal: offsets.Load reads both
		load: func(v *verifier) error {
			_, err := offsets.Load(v.ro, v.opts.Dir, zerolog.Nop()) // its error says the way out
			return err
		},
		refuses: "every start of the engine refuses the store; removing the files instead loses every consumer " +
			"group's committed offsets",
	},
}

func (v *verifier) configFile(name string) string {
	return path.Join(v.opts.Dir, meta.ConfigDirName, name)
}

// checkConfig reports each config file that cannot be read, neither it nor its backup.
func (v *verifier) checkConfig() {
	for _, c := range configChecks {
		err := c.load(v)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		desc := fmt.Sprintf("%v; %s", err, c.refuses)
		if c.wayOut != "" {
			desc += "; " + c.wayOut
		}
		v.configBad = append(v.configBad, c.name)
		v.problems.add(Problem{Kind: KindConfig, File: v.rel(v.configFile(c.name)), Desc: desc})
	}
}
