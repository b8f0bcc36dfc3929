package golden

import "testing"

func TestLoad(t *testing.T) {
	v := Load()
	for name, r := range v.Records() {
		if len(r.Bytes()) != r.TotalSize || r.TotalSize == 0 {
			t.Errorf("%s: %d bytes, totalSize %d", name, len(r.Bytes()), r.TotalSize)
		}
	}
	if len(v.INDEX.Entries) != 4 || v.INDEX.HeaderFields.IndexCount != 5 {
		t.Errorf("index vectors not parsed: %+v", v.INDEX.HeaderFields)
	}
	if len(v.HASHES) < 9 || v.CHECKPOINT.FileSize != 4096 || v.BLANK.MaxBlank != 824 {
		t.Error("hashes, checkpoint or blank vectors not parsed")
	}
}
