package meta

// quoteIntKeys returns b with every object key that is a bare integer put in quotes, turning
// what RocketMQ's fastjson writes for a Map<Integer, Long> ({0:250,1:300}) into standard JSON
// ({"0":250,"1":300}). Bytes inside strings are left alone, and a number counts as a key only
// when it follows '{' or ',' and is followed by ':', which a JSON value never is; so valid JSON
// comes back unchanged, as the same slice. Anything else that is not JSON is left for the
// decoder to reject.
func quoteIntKeys(b []byte) []byte {
	var out []byte // nil until the first key needs quotes
	copied := 0    // b[:copied] is already in out
	inString, keyPos := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString, keyPos = true, false
		case c == '{' || c == ',':
			keyPos = true
		case isJSONSpace(c):
			// A key may follow after any amount of white space.
		case keyPos && (c == '-' || isDigit(c)):
			end := i + 1
			for end < len(b) && isDigit(b[end]) {
				end++
			}
			colon := end
			for colon < len(b) && isJSONSpace(b[colon]) {
				colon++
			}
			if isDigit(b[end-1]) && colon < len(b) && b[colon] == ':' {
				out = append(out, b[copied:i]...)
				out = append(out, '"')
				out = append(out, b[i:end]...)
				out = append(out, '"')
				copied = end
			}
			i = end - 1
			keyPos = false
		default:
			keyPos = false
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[copied:]...)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
