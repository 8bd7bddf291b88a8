package config

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func Test27BMesh(t *testing.T) {
	tests := []struct {
		devices int
		want    Shard
		err     string
	}{
		{devices: 1, want: Shard{Devices: 1, AttentionHeads: 24, KVHeads: 4, KVReplicas: 1,
			LinearKeyHeads: 16, LinearValueHeads: 48, ConvChannels: 10240,
			IntermediateSize: 17408, VocabRows: 248320}},
		// reference/qwen27b.md, "Per-device shapes at TP=2".
		{devices: 2, want: Shard{Devices: 2, AttentionHeads: 12, KVHeads: 2, KVReplicas: 1,
			LinearKeyHeads: 8, LinearValueHeads: 24, ConvChannels: 5120,
			IntermediateSize: 8704, VocabRows: 124160}},
		{devices: 4, want: Shard{Devices: 4, AttentionHeads: 6, KVHeads: 1, KVReplicas: 1,
			LinearKeyHeads: 4, LinearValueHeads: 12, ConvChannels: 2560,
			IntermediateSize: 4352, VocabRows: 62080}},
		// 4 kv heads over 8 cards: each kv head on 2 cards.
		{devices: 8, want: Shard{Devices: 8, AttentionHeads: 3, KVHeads: 1, KVReplicas: 2,
			LinearKeyHeads: 2, LinearValueHeads: 6, ConvChannels: 1280,
			IntermediateSize: 2176, VocabRows: 31040}},
		{devices: 5, err: "mesh 1x5: num_attention_heads 24 is not divisible by 5 devices"},
		{devices: 3, err: "mesh 1x3: num_key_value_heads 4 is neither divisible by 3 devices nor replicable over them (3 is not a multiple of 4)"},
		{devices: 6, err: "mesh 1x6: num_key_value_heads 4 is neither divisible by 6 devices nor replicable over them (6 is not a multiple of 4)"},
		{devices: 12, err: "mesh 1x12: linear_num_key_heads 16 is not divisible by 12 devices"},
		{devices: 16, err: "mesh 1x16: num_attention_heads 24 is not divisible by 16 devices"},
		{devices: 0, err: "mesh 1x0: device count must be >= 1"},
	}
	c := Default27B()
	for _, tt := range tests {
		t.Run(meshName(tt.devices), func(t *testing.T) {
			got, err := c.Shard(tt.devices)
			checkErr := c.CheckMesh(tt.devices)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Errorf("Shard error = %v, want %q", err, tt.err)
				}
				if checkErr == nil || checkErr.Error() != tt.err {
					t.Errorf("CheckMesh error = %v, want %q", checkErr, tt.err)
				}
				return
			}
			if err != nil || checkErr != nil {
				t.Fatalf("Shard: %v, CheckMesh: %v", err, checkErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Shard mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSmallMesh(t *testing.T) {
	c, err := Load(filepath.Join("..", "qwen27b", "testdata", "small.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		devices int
		want    Shard
		err     string
	}{
		{devices: 1, want: Shard{Devices: 1, AttentionHeads: 8, KVHeads: 4, KVReplicas: 1,
			LinearKeyHeads: 4, LinearValueHeads: 12, ConvChannels: 640,
			IntermediateSize: 512, VocabRows: 2048}},
		{devices: 2, want: Shard{Devices: 2, AttentionHeads: 4, KVHeads: 2, KVReplicas: 1,
			LinearKeyHeads: 2, LinearValueHeads: 6, ConvChannels: 320,
			IntermediateSize: 256, VocabRows: 1024}},
		{devices: 4, want: Shard{Devices: 4, AttentionHeads: 2, KVHeads: 1, KVReplicas: 1,
			LinearKeyHeads: 1, LinearValueHeads: 3, ConvChannels: 160,
			IntermediateSize: 128, VocabRows: 512}},
		// kv heads would replicate, but 4 GDN key heads do not split over 8.
		{devices: 8, err: "mesh 1x8: linear_num_key_heads 4 is not divisible by 8 devices"},
	}
	for _, tt := range tests {
		t.Run(meshName(tt.devices), func(t *testing.T) {
			got, err := c.Shard(tt.devices)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Errorf("Shard error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Shard mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMeshIntermediateAndVocab(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(c *Config)
		devices      int
		err          string
		rows, padded int
	}{
		{name: "intermediate not whole tiles per device", devices: 2,
			mutate: func(c *Config) { c.IntermediateSize = 17440 }, // 545 tiles
			err:    "mesh 1x2: intermediate_size 17440 does not split into whole 32-wide tiles over 2 devices (needs a multiple of 64)"},
		{name: "intermediate divisible but not in tiles", devices: 2,
			mutate: func(c *Config) { c.IntermediateSize = 17410 },
			err:    "mesh 1x2: intermediate_size 17410 does not split into whole 32-wide tiles over 2 devices (needs a multiple of 64)"},
		// 151936 / 8 = 18992 rows = 593.5 tiles -> 594 tiles = 19008 rows.
		{name: "vocab padded per device", devices: 8,
			mutate: func(c *Config) { c.VocabSize = 151936 },
			rows:   19008, padded: 19008*8 - 151936},
		// 1000 / 2 = 500 rows -> 16 tiles = 512 rows.
		{name: "vocab not divisible by devices", devices: 2,
			mutate: func(c *Config) { c.VocabSize = 1000 },
			rows:   512, padded: 24},
		{name: "invalid config", devices: 2,
			mutate: func(c *Config) { c.NumKeyValueHeads = 0 },
			err:    "mesh 1x2: num_key_value_heads is 0, want > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default27B()
			tt.mutate(c)
			s, err := c.Shard(tt.devices)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Errorf("Shard error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.VocabRows != tt.rows || s.VocabPadding != tt.padded {
				t.Errorf("VocabRows, VocabPadding = %d, %d, want %d, %d", s.VocabRows, s.VocabPadding, tt.rows, tt.padded)
			}
		})
	}
}

// meshName names a subtest after the mesh.
func meshName(devices int) string { return fmt.Sprintf("1x%d", devices) }
