package commitlog

// DispatchProps are the properties dispatch needs from every record (what package derive works
// out its ConsumeQueue unit and IndexFile entries from), found in one pass over the properties
// instead of one lookup each: the dispatcher reads every record, and three scans of its
// properties cost it about a third of its time.
type DispatchProps struct {
	Tags, Keys, UniqKey, Delay []byte
}

// DispatchProps finds TAGS, KEYS, UNIQ_KEY and DELAY (the last entry wins, as with Get).
func (p Properties) DispatchProps() DispatchProps {
	var d DispatchProps
	it := p.Iter()
	for {
		n, v, ok := it.Next()
		if !ok {
			return d
		}
		switch string(n) {
		case PropTags:
			d.Tags = v
		case PropKeys:
			d.Keys = v
		case PropUniqKey:
			d.UniqKey = v
		case PropDelay:
			d.Delay = v
		}
	}
}
