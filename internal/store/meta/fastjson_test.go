package meta

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestQuoteIntKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{0:250,1:300}`:                   `{"0":250,"1":300}`,
		`{ 0 : 250 , -1:3}`:               `{ "0" : 250 , "-1":3}`,
		"{\n\t\t0:0\n\t\t}":               "{\n\t\t\"0\":0\n\t\t}",
		`{"a@b":{12:34}}`:                 `{"a@b":{"12":34}}`,
		`{"0":1}`:                         `{"0":1}`,
		`[1,2,{3:4}]`:                     `[1,2,{"3":4}]`,
		`{"s":"{0:1,2:3}","t":"\"{4:5}"}`: `{"s":"{0:1,2:3}","t":"\"{4:5}"}`,
		`{"x":[0,1],"y":{2:[3,4]}}`:       `{"x":[0,1],"y":{"2":[3,4]}}`,
		`{-:1}`:                           `{-:1}`,
		`{1.5:2}`:                         `{1.5:2}`,
		`{12`:                             `{12`,
		``:                                ``,
		`{"k":-7,"m":{0:-7}}`:             `{"k":-7,"m":{"0":-7}}`,
		`{"offsetTable":{"t@g":{0:250}}}`: `{"offsetTable":{"t@g":{"0":250}}}`,
		`{"escaped\\":{1:2}}`:             `{"escaped\\":{"1":2}}`,
		`{"a":{"b":{"c":{9223372036854775807:1}}}}`: `{"a":{"b":{"c":{"9223372036854775807":1}}}}`,
	} {
		if got := string(quoteIntKeys([]byte(in))); got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}

// TestLoadFastjsonOffsets loads consumerOffset.json as RocketMQ's broker writes it (fastjson,
// pretty-printed with tabs, queue ids as bare integer keys).
func TestLoadFastjsonOffsets(t *testing.T) {
	m := newMem(t, "store/config")
	rocketmq := "{\n\t\"offsetTable\":{\n\t\t\"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4\":{0:0\n\t\t},\n" +
		"\t\t\"TopicTest@please_rename_unique_group_name_4\":{0:250,1:250,2:251,3:249\n\t\t}\n\t}\n}"
	if err := WriteFileAtomic(m, offsetsPath, []byte(rocketmq)); err != nil {
		t.Fatal(err)
	}
	var got ConsumerOffsetFile
	src, err := Load(m, offsetsPath, &got)
	if err != nil || src.FromBackup() {
		t.Fatalf("%+v, %v", src, err)
	}
	want := ConsumerOffsetFile{OffsetTable: map[string]map[int32]int64{
		"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4": {0: 0},
		"TopicTest@please_rename_unique_group_name_4":                                {0: 250, 1: 250, 2: 251, 3: 249},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v", got)
	}
	o := NewConsumerOffsets(got)
	if off, ok := o.Offset("please_rename_unique_group_name_4", "TopicTest", 2); off != 251 || !ok {
		t.Fatalf("offset %d, %v", off, ok)
	}
}

// FuzzQuoteIntKeys checks that valid JSON passes through untouched: the pre-processing exists
// for fastjson's output and must never alter a file written as standard JSON.
func FuzzQuoteIntKeys(f *testing.F) {
	for _, s := range []string{`{0:250,1:300}`, `{"a":{1:2},"b":"{3:4}"}`, `[1,{2:3}]`, `{"x":"\"}"}`, `{ -1 : 0 }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := quoteIntKeys(b)
		if json.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("valid JSON changed:\n in %q\nout %q", b, out)
		}
	})
}
