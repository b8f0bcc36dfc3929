package indexfile

import (
	"testing"

	"github.com/rocketstore/engine/internal/store/javahash"
)

func TestKeyHashMatchesJavahash(t *testing.T) {
	cases := []struct{ topic, key string }{
		{"TopicTest", "OrderID188"},
		{"TopicTest", "7F00000112340A0B0C0D000000640001"},
		{"", ""},
		{"T", "Aa"},
		{"T", "BB"},
		{"TopicTest", "DV[XZAX"}, // hashCode is Integer.MIN_VALUE: keyHash 0
		{"Tópico", "clé😀"},
		{"bad\xe2\x82", "\x82tail"}, // invalid UTF-8 on both sides of '#'
		{"\xff", "\xf0\x9f\x98"},
		{"%RETRY%group", "a#b"},
	}
	for _, c := range cases {
		want := javahash.IndexKeyHash(c.topic + "#" + c.key)
		if got := KeyHash(c.topic, c.key); got != want {
			t.Errorf("KeyHash(%q, %q) = %d, want %d", c.topic, c.key, got, want)
		}
	}
	if got := KeyHash("TopicTest", "DV[XZAX"); got != 0 {
		t.Errorf("MIN_VALUE key: KeyHash = %d, want 0", got)
	}
	if javahash.String("TopicTest#DV[XZAX") != -1<<31 {
		t.Fatal("test key no longer hashes to Integer.MIN_VALUE")
	}
}

func TestKeyHashAllocs(t *testing.T) {
	topic, key := "TopicTest", "OrderID188"
	if n := testing.AllocsPerRun(100, func() { _ = KeyHash(topic, key) }); n != 0 {
		t.Fatalf("KeyHash allocates %v times", n)
	}
}
