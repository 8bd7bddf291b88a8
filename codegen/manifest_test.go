package codegen_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// hostView is what a host written from the README's description of
// programs.json decodes; it shares no types with codegen, so a field the
// README promises and the build does not write fails the test.
type hostView struct {
	Schema         int    `json:"schema"`
	TCCVersion     string `json:"tcc_version"`
	Arch           string `json:"arch"`
	TTMetalRelease string `json:"tt_metal_release"`
	Devices        int    `json:"devices"`
	Buffers        []struct {
		Name     string `json:"name"`
		Kind     string `json:"kind"`
		PageSize int    `json:"page_size"`
		Pages    int    `json:"pages"`
		Memory   string `json:"memory"`
		DType    string `json:"dtype"`
	} `json:"buffers"`
	Inputs []struct {
		Name, Buffer, Fill string
	} `json:"inputs"`
	Outputs []struct{ Name, Buffer string }       `json:"outputs"`
	State   []struct{ Name, Buffer, Init string } `json:"state"`
	Weights []struct {
		Buffer string `json:"buffer"`
		Source *struct {
			Tensor     string `json:"tensor"`
			Transposed bool   `json:"transposed"`
			Axis       int    `json:"axis"`
			Parts      int    `json:"parts"`
		} `json:"source"`
	} `json:"weights"`
	Ethernet []struct {
		DeviceA  int `json:"device_a"`
		ChannelA int `json:"channel_a"`
		DeviceB  int `json:"device_b"`
		ChannelB int `json:"channel_b"`
	} `json:"ethernet"`
	MeshPrograms []int `json:"mesh_programs"`
	Programs     []struct {
		Device int    `json:"device"`
		Index  int    `json:"index"`
		Op     string `json:"op"`
		CBs    []struct {
			Index int `json:"index"`
		} `json:"cbs"`
		Kernels []struct {
			Name    string `json:"name"`
			Source  string `json:"source"`
			Compute *struct {
				UnpackToDestFP32 []int `json:"unpack_to_dest_fp32_cbs"`
			} `json:"compute"`
			Ethernet *struct {
				EthMode string `json:"eth_mode"`
			} `json:"ethernet"`
		} `json:"kernels"`
		Buffers []struct {
			Name string `json:"name"`
		} `json:"buffers"`
	} `json:"programs"`
}

// TestHostContract builds qwen27b (small config, mesh 1x2) and reads its
// programs.json as a host would, with nothing but the file: every buffer
// to allocate, every input to fill, every weight to convert, every state
// to initialise, the ethernet links and the programs to launch together.
func TestHostContract(t *testing.T) {
	b, m, args := compileQwen(t, map[string]string{"config": "../models/qwen27b/testdata/small.json"}, ir.Mesh{Rows: 1, Cols: 2})
	info, err := m.HostInfo(args)
	if err != nil {
		t.Fatal(err)
	}
	files, err := b.FilesWith(info)
	if err != nil {
		t.Fatal(err)
	}
	// The file validates against its schema: the Go types of
	// codegen.ProgramsFile, no unknown or missing fields.
	var pf codegen.ProgramsFile
	strict := json.NewDecoder(bytes.NewReader(files["programs.json"]))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&pf); err != nil {
		t.Fatalf("programs.json does not match codegen.ProgramsFile: %v", err)
	}
	if pf.Manifest == nil || len(pf.Programs) != 2*len(b.Programs) {
		t.Fatalf("manifest %v, %d program entries", pf.Manifest != nil, len(pf.Programs))
	}
	var h hostView
	dec := json.NewDecoder(bytes.NewReader(files["programs.json"]))
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("programs.json does not decode: %v", err)
	}
	if h.Schema != codegen.SchemaVersion || h.TCCVersion == "" || h.Arch != "blackhole" || h.TTMetalRelease != target.TTMetalRelease {
		t.Errorf("header: schema %d, tcc %q, arch %q, tt-metal %q", h.Schema, h.TCCVersion, h.Arch, h.TTMetalRelease)
	}
	alloc := map[string]bool{}
	for _, bf := range h.Buffers {
		if bf.PageSize <= 0 || bf.Pages <= 0 || bf.Memory == "" || bf.DType == "" {
			t.Errorf("buffer %+v cannot be allocated from its entry", bf)
		}
		alloc[bf.Name] = true
	}
	for _, p := range h.Programs {
		for _, pb := range p.Buffers {
			if !alloc[pb.Name] {
				t.Errorf("program %d (%s) uses buffer %q, which the buffer list does not allocate", p.Index, p.Op, pb.Name)
			}
		}
	}
	fills := map[string]bool{}
	for _, in := range h.Inputs {
		if !alloc[in.Buffer] || in.Fill == "" || in.Fill == "host data" {
			t.Errorf("input %+v: no buffer or no fill", in)
		}
		fills[in.Name] = true
	}
	for _, want := range []string{"tokens", "pos", "rope.cos", "rope.sin"} {
		if !fills[want] {
			t.Errorf("input %q is not in the manifest", want)
		}
	}
	if len(h.Outputs) != 2 {
		t.Errorf("%d outputs, want the logits and the next token", len(h.Outputs))
	}
	for _, s := range h.State {
		if !alloc[s.Buffer] || s.Init != "zeros" {
			t.Errorf("state %+v", s)
		}
	}
	if len(h.State) == 0 || len(h.Weights) != len(b.Graph.Weights) {
		t.Errorf("%d states, %d weights (graph: %d)", len(h.State), len(h.Weights), len(b.Graph.Weights))
	}
	for _, w := range h.Weights {
		if w.Source == nil || w.Source.Tensor == "" || !alloc[w.Buffer] {
			t.Fatalf("weight %q has no checkpoint source", w.Buffer)
		}
	}
	if len(h.Ethernet) == 0 || len(h.MeshPrograms) == 0 {
		t.Fatalf("mesh 1x2: %d ethernet links, %d mesh programs", len(h.Ethernet), len(h.MeshPrograms))
	}
	for _, i := range h.MeshPrograms {
		eth := false
		for _, k := range h.Programs[i].Kernels {
			eth = eth || k.Ethernet != nil
		}
		if !eth {
			t.Errorf("mesh program %d has no ethernet kernel", i)
		}
	}
	exact := 0
	for _, p := range h.Programs {
		for _, k := range p.Kernels {
			if k.Compute != nil && k.Compute.UnpackToDestFP32 == nil {
				t.Fatalf("program %d kernel %s: no unpack_to_dest_fp32_cbs", p.Index, k.Name)
			}
			if k.Compute != nil {
				exact += len(k.Compute.UnpackToDestFP32)
			}
		}
	}
	if exact == 0 {
		t.Error("no compute kernel unpacks an fp32 CB to DEST; the GDN recurrence state must")
	}
}

// A weight stored in transposed tiles is declared in layout tile_t in
// programs.json's buffers (the checkpoint converter packs it so), and
// the layout section describes tile_t only then.
func TestManifestTransposedTiles(t *testing.T) {
	b := ir.NewBuilder("t")
	x := b.Input("x", ir.T(ir.BF16, 32, 64))
	w := b.Weight("w", ir.T(ir.BFP8B, 64, 32))
	b.Region("mlp", 0)
	b.Output(b.Matmul(x, w))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	bld, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	layoutOf := func() (string, string) {
		m, err := bld.Manifest(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Buffers {
			if e.Name == "w" {
				return e.Layout, m.Layout.TileTransposed
			}
		}
		t.Fatal("no buffer w")
		return "", ""
	}
	if l, d := layoutOf(); l != "tile" || d != "" {
		t.Errorf("tile weight: layout %q, tile_t description %q; want tile and none", l, d)
	}
	// The programs read w as tile layout; the manifest only reads its type.
	w.Type.TilesTransposed = true
	if l, d := layoutOf(); l != "tile_t" || d == "" {
		t.Errorf("transposed-tile weight: layout %q, tile_t description %q; want tile_t and a description", l, d)
	}
}
