package checkpoint_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/models/checkpoint"
)

// handCache writes a one-device cache of two 8-byte buffers a and b by
// hand (no checkpoint, no build) after edit changes its manifest.
func handCache(t *testing.T, edit func(m *checkpoint.CacheManifest)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := []byte("aaaaaaaabbbbbbbb")
	if err := os.WriteFile(filepath.Join(dir, "device-0.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	m := &checkpoint.CacheManifest{Schema: checkpoint.CacheSchema, Devices: 1, Complete: true, Files: []string{"device-0.bin"},
		Tensors: []checkpoint.CacheEntry{
			{Buffer: "a", Offset: 0, Size: 8, Results: []string{sum(data[:8])}},
			{Buffer: "b", Offset: 8, Size: 8, Results: []string{sum(data[8:])}},
		}}
	edit(m)
	writeJSON(t, filepath.Join(dir, checkpoint.ManifestFile), m)
	return dir
}

// TestCacheManifestExtents: a manifest's offsets and sizes are checked
// without overflow and extents may not overlap; errors name the buffer
// and the rule, never a panic.
func TestCacheManifestExtents(t *testing.T) {
	if _, err := checkpoint.LoadCache(handCache(t, func(*checkpoint.CacheManifest) {})); err != nil {
		t.Fatalf("valid hand-made cache: %v", err)
	}
	for _, tt := range []struct {
		name string
		edit func(m *checkpoint.CacheManifest)
		want string
	}{
		{"overflow", func(m *checkpoint.CacheManifest) { m.Tensors[1].Offset, m.Tensors[1].Size = 1<<62, 1<<62 }, `buffer "b": offset 4611686018427387904 + size 4611686018427387904 overflows`},
		{"huge", func(m *checkpoint.CacheManifest) { m.Tensors[1].Size = math.MaxInt64 }, `buffer "b"`},
		{"negative size", func(m *checkpoint.CacheManifest) { m.Tensors[1].Size = -8 }, `buffer "b" has size -8; a size must be >= 0`},
		{"negative offset", func(m *checkpoint.CacheManifest) { m.Tensors[0].Offset = -1 }, `buffer "a" has offset -1`},
		{"aliased", func(m *checkpoint.CacheManifest) {
			m.Tensors[1].Offset, m.Tensors[1].Results = m.Tensors[0].Offset, m.Tensors[0].Results
		}, `overlaps buffer "a" [0, +8); extents must be disjoint`},
		{"partly overlapping", func(m *checkpoint.CacheManifest) { m.Tensors[0].Size = 9 }, `buffer "b" [8, +8) overlaps buffer "a" [0, +9)`},
		{"duplicate name", func(m *checkpoint.CacheManifest) { m.Tensors[1].Buffer = "a" }, `buffer "a" appears twice`},
		{"foreign file", func(m *checkpoint.CacheManifest) { m.Files[0] = "../device-0.bin" }, `files[0] is "../device-0.bin"; want "device-0.bin"`},
		{"results", func(m *checkpoint.CacheManifest) { m.Tensors[0].Results = nil }, `buffer "a" has 0 results_sha256`},
		{"truncated", func(m *checkpoint.CacheManifest) { m.Tensors[1].Size = 9 }, `buffer "b" [8, +9) is outside`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkpoint.LoadCache(handCache(t, tt.edit))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestCacheIncomplete: an interrupted conversion (only the partial
// manifest), a manifest saying complete: false and a missing device file
// are each reported as an incomplete cache.
func TestCacheIncomplete(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  string
	}{
		{"interrupted", func(t *testing.T, dir string) {
			p := filepath.Join(dir, checkpoint.ManifestFile)
			if err := os.Rename(p, p+".partial"); err != nil {
				t.Fatal(err)
			}
		}, "is incomplete: an interrupted conversion wrote 2 weight buffers (manifest.json.partial); run tcc weights convert again"},
		{"not complete", func(t *testing.T, dir string) {
			p := filepath.Join(dir, checkpoint.ManifestFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"complete": true`, `"complete": false`, 1)), 0o644)
		}, "is incomplete: manifest.json says complete: false"},
		{"missing device file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "device-0.bin"))
		}, "is incomplete: manifest.json names device-0.bin, which is missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := handCache(t, func(*checkpoint.CacheManifest) {})
			tt.spoil(t, dir)
			if !checkpoint.IsCache(dir) {
				t.Errorf("IsCache(%s) = false", dir)
			}
			_, err := checkpoint.LoadCache(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
