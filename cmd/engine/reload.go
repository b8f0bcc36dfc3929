package main

import (
	"strconv"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
)

// SIGHUP: the configuration is built again the way it was at start (the saved command line
// parsed again: the configuration file is read again, flags and environment variables still
// win) and checked whole. What is safe to change while running is applied: the log level and
// the retention settings. A change of any other key is logged and refused: it needs a restart.
// An invalid configuration changes nothing.

// reloadable are the keys SIGHUP applies.
var reloadable = map[string]bool{
	"log_level":                 true,
	"file_reserved_time":        true,
	"delete_when":               true,
	"clean_interval":            true,
	"disk_max_used_ratio":       true,
	"disk_clean_forcibly_ratio": true,
	"disk_warning_ratio":        true,
	"delete_files_per_pass":     true,
	"no_retention":              true,
}

// reloadTarget is what a reload changes: the running server (an interface, for the tests).
type reloadTarget interface {
	SetLogLevel(zerolog.Level)
	SetRetention(engine.Retention) error
}

// serverTarget adapts a running server.
type serverTarget struct{ srv *engine.Server }

func (t serverTarget) SetLogLevel(l zerolog.Level)           { t.srv.SetLogLevel(l) }
func (t serverTarget) SetRetention(r engine.Retention) error { return t.srv.Engine.SetRetention(r) }

func (r *runCmd) reload(srv *engine.Server, log zerolog.Logger) {
	r.reloadInto(serverTarget{srv}, log)
}

// reloadInto reads the configuration again and applies what is safe to t. It returns the keys
// applied and the keys refused (changed, but they need a restart).
func (r *runCmd) reloadInto(t reloadTarget, log zerolog.Logger) (applied, refused []string) {
	log = log.With().Str("signal", "SIGHUP").Logger()
	var c cli
	parser, err := newParser(&c)
	if err != nil {
		log.Error().Err(err).Msg("reload failed: nothing changed")
		return nil, nil
	}
	if _, err := parser.Parse(r.args); err != nil {
		log.Error().Err(err).Msg("reload refused: the configuration is invalid; nothing changed")
		return nil, nil
	}
	next := &c.Run
	if err := next.validate(); err != nil {
		log.Error().Err(err).Msg("reload refused: the configuration is invalid; nothing changed")
		return nil, nil
	}
	now := map[string]setting{}
	for _, s := range r.settings {
		now[s.key] = s
	}
	type change struct{ key, from, to, source string }
	var apply []change
	for _, s := range next.settings {
		old, ok := now[s.key]
		if !ok {
			continue
		}
		from, to := formatValue(old.value), formatValue(s.value)
		if from == to {
			continue
		}
		from, to = unquoted(from), unquoted(to)
		if secret[s.key] {
			from, to = "<hidden>", "<hidden, changed>"
		}
		ch := change{s.key, from, to, next.describeSource(s.source)}
		if !reloadable[s.key] {
			refused = append(refused, s.key)
			log.Warn().Str("key", ch.key).Str("running", ch.from).Str("new", ch.to).Str("source", ch.source).
				Msg("reload: not applied, this setting needs a restart")
			continue
		}
		apply = append(apply, ch)
	}
	retentionChanged := false
	for _, ch := range apply {
		if ch.key != "log_level" {
			retentionChanged = true
		}
	}
	if retentionChanged {
		if err := t.SetRetention(next.retention()); err != nil {
			log.Error().Err(err).Msg("reload: the retention settings were refused; nothing changed")
			return nil, refused
		}
	}
	var level, was zerolog.Level
	levelChanged := false
	for _, ch := range apply {
		applied = append(applied, ch.key)
		log.Info().Str("key", ch.key).Str("from", ch.from).Str("to", ch.to).Str("source", ch.source).Msg("reload: applied")
		if ch.key == "log_level" {
			levelChanged = true
			level, _ = zerolog.ParseLevel(c.LogLevel)
			was, _ = zerolog.ParseLevel(ch.from)
		}
	}
	// The applied keys now run with their new values; refused ones keep showing as changed.
	for i, s := range r.settings {
		for _, n := range next.settings {
			if n.key == s.key && reloadable[s.key] {
				r.settings[i] = n
			}
		}
	}
	r.file = next.file
	// "config reloaded" says the reload is done, so a more verbose level is in force before it
	// is written (what happens after it is logged at the new level); a less verbose one comes
	// after it, so that the line is still written.
	if levelChanged && level < was {
		t.SetLogLevel(level)
	}
	log.Info().Strs("applied", applied).Strs("refused", refused).Msg("config reloaded")
	if levelChanged && level >= was {
		t.SetLogLevel(level)
	}
	return applied, refused
}

// unquoted is a formatted value for a log field: a string without its quotes.
func unquoted(v string) string {
	if u, err := strconv.Unquote(v); err == nil {
		return u
	}
	return v
}
