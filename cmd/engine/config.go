package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats-server/v2/conf"
)

// The configuration of `engine run`: defaults < configuration file < environment < flags.
//
// The file is in the NATS server config format (github.com/nats-io/nats-server/v2/conf): a JSON
// superset with comments, includes and variables, which NATS users know and which costs no new
// dependency (the embedded nats-server already brings the parser). Its keys are the flags'
// names with '_' for '-' (--file-reserved-time is file_reserved_time), at the top level; the
// global --log-level and --log-format are keys too.
//
// How the precedence is implemented: kong parses the command line and applies the environment
// variables and defaults; run's BeforeResolve hook then loads the file named by --config (or
// $ENGINE_CONFIG) and adds a kong resolver. Kong asks resolvers only for flags not given on the
// command line, and the resolver answers only for keys the file sets and whose environment
// variable is unset: so a flag beats everything, a variable beats the file, and the file beats
// the default. Every file value is checked by the flag's own decoder before kong sees it, so that
// an error names the file and the key. After parsing, the AfterApply hook records where each
// value came from (the command line, a variable, the file, the default), for -t and for SIGHUP.
//
// SIGHUP parses the saved command line again the same way (reload.go): the file is read again,
// and flags and variables still win.

// Sources of a setting.
const (
	sourceDefault = "default"
	sourceFlag    = "flag"
	sourceFile    = "file"
)

// notInFile are the flags that are not configuration keys.
var notInFile = map[string]bool{"help": true, "config": true, "check_config": true}

// secret keys are printed hidden.
var secret = map[string]bool{"password": true, "token": true, "console_password": true}

// configError is an invalid configuration: the command exits 2.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

func configErrorf(format string, args ...any) error {
	return &configError{fmt.Errorf(format, args...)}
}

// configFile is a loaded configuration file.
type configFile struct {
	path   string
	values map[string]any
	// resolved are the file's values the resolver gives kong, as the flags' text.
	resolved map[*kong.Flag]string
}

// setting is one configuration key after parsing.
type setting struct {
	key    string
	flag   *kong.Flag
	value  reflect.Value // the field
	source string        // sourceDefault, sourceFlag, sourceFile or "env NAME"
}

// fileKey is the configuration key of a flag.
func fileKey(f *kong.Flag) string { return strings.ReplaceAll(f.Name, "-", "_") }

// configFlags are the flags that are configuration keys, for the path: the global ones, then
// the command's.
func configFlags(kctx *kong.Context) []*kong.Flag {
	var out []*kong.Flag
	for _, p := range kctx.Path {
		if p.App == nil && p.Command == nil {
			continue
		}
		for _, f := range p.Flags {
			if !notInFile[fileKey(f)] {
				out = append(out, f)
			}
		}
	}
	return out
}

// BeforeResolve loads the configuration file, if one is named, and adds the resolver that
// gives kong its values (see the top of this file).
func (r *runCmd) BeforeResolve(kctx *kong.Context, trace *kong.Path) error {
	var cfg *kong.Flag
	for _, f := range trace.Flags {
		if f.Name == "config" {
			cfg = f
		}
	}
	if cfg == nil {
		return nil
	}
	path, _ := kctx.FlagValue(cfg).(string)
	if path == "" {
		return nil
	}
	file, err := loadConfigFile(path, configFlags(kctx))
	if err != nil {
		return err
	}
	r.file = file
	kctx.AddResolver(kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, f *kong.Flag) (any, error) {
		if v, ok := file.resolved[f]; ok {
			return v, nil
		}
		return nil, nil
	}))
	return nil
}

// AfterApply records every setting's value and source, and the command line for SIGHUP.
func (r *runCmd) AfterApply(kctx *kong.Context) error {
	r.args = slices.Clone(kctx.Args)
	r.settings = collectSettings(kctx)
	return nil
}

// loadConfigFile parses the file at path and turns its values into the text of the flags
// they set, for the keys no environment variable sets.
//
// A top-level name that is no key but that a $NAME reference uses is a variable the file sets
// for itself, as in nats-server (whose parser, in its checking mode, marks the names used as
// variables, and whose own configuration skips them the same way); a name that is no key and
// that nothing uses is an unknown key, so that a typo is still refused.
func loadConfigFile(path string, flags []*kong.Flag) (*configFile, error) {
	tokens, err := conf.ParseFileWithChecks(path)
	if err != nil {
		return nil, configErrorf("config file %s: %w", path, err)
	}
	byKey := map[string]*kong.Flag{}
	var keys []string
	for _, f := range flags {
		byKey[fileKey(f)] = f
		keys = append(keys, fileKey(f))
		for _, a := range f.Aliases {
			byKey[strings.ReplaceAll(a, "-", "_")] = f
		}
	}
	values := make(map[string]any, len(tokens))
	for name, v := range tokens {
		tk, isToken := v.(confToken)
		if _, key := byKey[strings.ToLower(name)]; !key && isToken && tk.IsUsedVariable() {
			continue // a variable the file sets for its $NAME references
		}
		values[name] = unwrapToken(v)
	}
	file := &configFile{path: path, values: values, resolved: map[*kong.Flag]string{}}
	var errs []error
	seen := map[*kong.Flag]string{}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		key := strings.ToLower(name) // keys are case-insensitive, as nats-server's
		f, ok := byKey[key]
		if !ok {
			var hints []string
			if near := nearest(key, keys); near != "" {
				hints = append(hints, fmt.Sprintf("did you mean %q?", near))
			}
			if name == strings.ToUpper(name) {
				hints = append(hints, "a variable set in the file must be used: $"+name)
			}
			msg := fmt.Sprintf("  unknown key %q", key)
			if len(hints) > 0 {
				msg += " (" + strings.Join(hints, " ") + ")"
			}
			errs = append(errs, errors.New(msg))
			continue
		}
		if other, dup := seen[f]; dup {
			errs = append(errs, fmt.Errorf("  %q and %q are the same key", other, key))
			continue
		}
		seen[f] = key
		text, err := flagText(f, values[name])
		if err == nil {
			err = checkFlagText(f, text)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("  %s: %w", key, err))
			continue
		}
		if envSet(f) != "" {
			continue // the environment beats the file
		}
		file.resolved[f] = text
	}
	if err := errors.Join(errs...); err != nil {
		return nil, configErrorf("config file %s:\n%w", path, err)
	}
	return file, nil
}

// confToken is a value as the config parser's checking mode returns it (its type is not
// exported): the value, and whether a $NAME reference used it.
type confToken interface {
	Value() any
	IsUsedVariable() bool
}

// unwrapToken is v without its tokens, in lists and blocks too.
func unwrapToken(v any) any {
	if tk, ok := v.(confToken); ok {
		v = tk.Value()
	}
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = unwrapToken(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = unwrapToken(e)
		}
		return out
	}
	return v
}

var durationType = reflect.TypeFor[time.Duration]()

// flagText turns a value of the file into the text the flag's decoder reads.
func flagText(f *kong.Flag, v any) (string, error) {
	isDuration := f.Target.Type() == durationType
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		if isDuration && v != 0 {
			return "", fmt.Errorf("%d is a number, not a duration: write a duration as a quoted string, e.g. \"2m\" or \"500ms\" "+
				"(unquoted, 2m would be read as 2 million)", v)
		}
		if isDuration {
			return "0s", nil
		}
		return strconv.FormatInt(v, 10), nil
	case float64:
		if isDuration {
			return "", fmt.Errorf("%v is a number, not a duration: write a duration as a quoted string, e.g. \"1.5s\"", v)
		}
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case []any:
		if f.Target.Kind() != reflect.Slice && f.Target.Kind() != reflect.String {
			return "", errors.New("a list is not a value for this key")
		}
		parts := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("item %d of the list is %T, want a string", i+1, e)
			}
			if strings.TrimSpace(s) == "" {
				return "", fmt.Errorf("item %d of the list is empty", i+1)
			}
			if strings.Contains(s, ",") {
				return "", fmt.Errorf("item %q of the list holds a comma", s)
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", errors.New("a block ({ ... }) is not a value: the keys are all at the top level")
	default:
		return "", fmt.Errorf("unexpected value %v (%T)", v, v)
	}
}

// checkFlagText decodes text with the flag's own decoder into a scratch value, and checks its
// enum.
func checkFlagText(f *kong.Flag, text string) error {
	scratch := reflect.New(f.Target.Type()).Elem()
	if err := f.Mapper.Decode(&kong.DecodeContext{Value: f.Value, Scan: kong.Scan().PushTyped(text, kong.FlagValueToken)}, scratch); err != nil {
		return err
	}
	if f.Enum != "" && !f.EnumMap()[text] {
		return fmt.Errorf("%q is not one of %s", text, strings.Join(f.EnumSlice(), ", "))
	}
	return nil
}

// envSet is the first of the flag's environment variables that is set, "" if none is (kong
// reads the first one set, even when empty).
func envSet(f *kong.Flag) string {
	for _, e := range f.Envs {
		if _, ok := os.LookupEnv(e); ok {
			return e
		}
	}
	return ""
}

// collectSettings lists every configuration key of the parsed command line with its value and
// where the value came from.
func collectSettings(kctx *kong.Context) []setting {
	given, resolved := map[*kong.Flag]bool{}, map[*kong.Flag]bool{}
	for _, p := range kctx.Path {
		if p.Flag != nil {
			if p.Resolved {
				resolved[p.Flag] = true
			} else {
				given[p.Flag] = true
			}
		}
	}
	var out []setting
	for _, f := range configFlags(kctx) {
		src := sourceDefault
		switch env := envSet(f); {
		case given[f]:
			src = sourceFlag
		case resolved[f]:
			src = sourceFile
		case env != "":
			src = "env " + env
		}
		out = append(out, setting{key: fileKey(f), flag: f, value: f.Target, source: src})
	}
	return out
}

// sourceOf is where the value of key came from.
func (r *runCmd) sourceOf(key string) string {
	for _, s := range r.settings {
		if s.key == key {
			return s.source
		}
	}
	return sourceDefault
}

// holdsDefault says key holds its default value, wherever the value came from: for the checks
// that ask whether a key is set, a key set to its default is not (replicated: false needs no
// partitions), so that -t's output, which writes every key, reads back as the configuration it
// describes.
func (r *runCmd) holdsDefault(key string) bool {
	for _, s := range r.settings {
		if s.key == key {
			return s.source == sourceDefault || formatValue(s.value) == formatValue(defaultValue(s.flag))
		}
	}
	return true
}

// defaultValue is the flag's default, decoded as kong decodes it.
func defaultValue(f *kong.Flag) reflect.Value {
	v := reflect.New(f.Target.Type()).Elem()
	if f.HasDefault {
		_ = f.Mapper.Decode(&kong.DecodeContext{Value: f.Value, Scan: kong.Scan().PushTyped(f.Default, kong.FlagValueToken)}, v)
	}
	return v
}

// unusedDefault says why key's default is not in effect, "" if it is or key is set. Whether
// these keys are set matters, not only their value: set, listen overrides nats_config's
// address, and subjects and queues are refused with partitions. So -t prints them as comments:
// written as settings, they would change the configuration read back.
func (r *runCmd) unusedDefault(key string) string {
	if r.sourceOf(key) != sourceDefault {
		return ""
	}
	switch {
	case key == "listen" && r.Server != "":
		return "not used with server (an external one)"
	case key == "listen" && r.NATSConfig != "":
		return "not used: nats_config gives the embedded server's address"
	case key == "subjects" && r.Partitions != 0:
		return "not used with partitions: the engine subscribes to its partitions"
	case key == "subjects" && r.JSStream != "":
		return "not used with js_stream: the stream's consumer decides what is stored"
	case key == "queues" && r.Partitions != 0:
		return "not used with partitions: a topic's queues are its partitions"
	}
	return ""
}

// describeSource is a source for humans.
func (r *runCmd) describeSource(src string) string {
	switch src {
	case sourceFlag:
		return "flag"
	case sourceFile:
		if r.file != nil {
			return "file " + r.file.path
		}
	}
	return src
}

// formatValue writes a value in the configuration file's format (so that -t's output can be
// used as a configuration file).
func formatValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case string:
		return quote(x)
	case []string:
		items := make([]string, len(x))
		for i, s := range x {
			items[i] = quote(s)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Duration:
		return quote(x.String())
	case byteSize:
		return quote(formatSize(int64(x)))
	case limitSize:
		if x < 0 {
			return "-1"
		}
		return quote(formatSize(int64(x)))
	default:
		return quote(fmt.Sprint(x))
	}
}

// formatSize writes a size with the largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// quote writes a double-quoted string the config parser reads back as it is.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// printConfig writes the effective configuration in the configuration file's format, each key
// with its source as a comment; a default that is not in effect is itself a comment (see
// unusedDefault), so that the output, used as the configuration file, gives the same
// configuration back.
func (r *runCmd) printConfig(w io.Writer) {
	fmt.Fprintln(w, "# engine run: the effective configuration, in the configuration file's format.")
	fmt.Fprintln(w, "# Each value comes from, by precedence: a flag, an environment variable, the")
	if r.file != nil {
		fmt.Fprintf(w, "# configuration file (%s), or the default.\n", r.file.path)
	} else {
		fmt.Fprintln(w, "# configuration file (none given: --config / $ENGINE_CONFIG), or the default.")
	}
	lines := make([]string, len(r.settings))
	width := 0
	for i, s := range r.settings {
		v := formatValue(s.value)
		if secret[s.key] && !s.value.IsZero() {
			v = quote("<hidden>")
		}
		lines[i] = s.key + ": " + v
		if r.unusedDefault(s.key) != "" {
			lines[i] = "# " + lines[i]
		}
		if len(lines[i]) <= 56 {
			width = max(width, len(lines[i]))
		}
	}
	for i, s := range r.settings {
		src := s.source
		if src == sourceFile {
			src = "file"
		}
		if secret[s.key] && !s.value.IsZero() {
			src += " (value hidden)"
		}
		if why := r.unusedDefault(s.key); why != "" {
			src += "; " + why
		}
		fmt.Fprintf(w, "%-*s  # %s\n", width, lines[i], src)
	}
}

// nearest is the key closest to key by edit distance, if close enough to be a typo.
func nearest(key string, keys []string) string {
	best, bestD := "", len(key)/2+2
	for _, k := range keys {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// limitSize is a size that also takes -1, for "no limit".
type limitSize int64

func (l *limitSize) UnmarshalText(text []byte) error {
	if strings.TrimSpace(string(text)) == "-1" {
		*l = -1
		return nil
	}
	var b byteSize
	if err := b.UnmarshalText(text); err != nil {
		return fmt.Errorf("%w, or -1 for no limit", err)
	}
	*l = limitSize(b)
	return nil
}
