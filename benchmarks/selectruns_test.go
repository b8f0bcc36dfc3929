package benchmarks

import (
	"slices"
	"testing"
)

// TestSelectRunsKeepsWhatRatesComeFrom: a paced run picked alone brings the ceiling rounds its
// rate is taken from; a pattern that matches nothing is an error.
func TestSelectRunsKeepsWhatRatesComeFrom(t *testing.T) {
	runs, err := Preset("issue18", PresetOptions{Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := SelectRuns(runs, `^engine-sync/ff@75%$`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	want := []string{"ceiling-subscriber/ff#1", "ceiling-subscriber/ff#2", "ceiling-subscriber/ff#3", "engine-sync/ff@75%"}
	if !slices.Equal(ids, want) {
		t.Fatalf("selected %v, want %v", ids, want)
	}
	if _, err := SelectRuns(runs, `^nothing$`); err == nil {
		t.Fatal("a pattern that matches no run was taken")
	}
}
