package checkpoint_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/models/nn"
	"github.com/tcc-dev/tcc/models/qwen27b"
)

const smallConfig = "../qwen27b/testdata/small.json"

// fixture is the small qwen27b config's contract at mesh 1x2 and its
// random HF weights.
type fixture struct {
	pf  *codegen.ProgramsFile
	hf  []checkpoint.HFTensor
	cfg []byte
}

var shared *fixture

func setup(t testing.TB) *fixture {
	t.Helper()
	if shared != nil {
		return shared
	}
	m := qwen27b.Model{}
	args, err := models.DefaultArgs(m, map[string]string{"config": smallConfig})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.HostInfo(args)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := checkpoint.Programs(m.Name(), b, info)
	if err != nil {
		t.Fatal(err)
	}
	hf, err := checkpoint.RandomHF(m, args, 7)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(smallConfig)
	if err != nil {
		t.Fatal(err)
	}
	shared = &fixture{pf: pf, hf: hf, cfg: cfg}
	return shared
}

func write(t *testing.T, f *fixture, form checkpoint.Form) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), string(form))
	if err := checkpoint.WriteSynthetic(dir, f.cfg, form, f.hf, 2); err != nil {
		t.Fatal(err)
	}
	return dir
}

// expected cuts the dequantised HF tensor with nn.Share.Cut (the model's
// sharding of whole tensors) and packs it with the host packer.
func expected(t *testing.T, src *checkpoint.Source, pf *codegen.ProgramsFile, w codegen.WeightEntry, d int) []float32 {
	t.Helper()
	cut, dt, rows, cols := cutOf(t, src, pf, w, d)
	b, err := numerics.PackTilesHost(dt, numerics.Tilize(cut, rows, cols))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := numerics.UnpackTiles(dt, b)
	return numerics.Untilize(u, rows, cols)
}

// cutOf is device d's share of weight w (the dequantised HF tensor,
// transposed as its source says, cut with nn.Share.Cut) as a [rows, cols]
// matrix, and its buffer's dtype.
func cutOf(t *testing.T, src *checkpoint.Source, pf *codegen.ProgramsFile, w codegen.WeightEntry, d int) (cut []float32, dt ir.DType, rows, cols int) {
	t.Helper()
	data, shape, err := src.Float32(w.Source.Tensor)
	if err != nil {
		t.Fatal(err)
	}
	ws := ir.Shape(shape)
	if w.Source.Transposed {
		r, c := shape[0], shape[len(shape)-1]
		tr := make([]float32, len(data))
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				tr[j*r+i] = data[i*c+j]
			}
		}
		data, ws = tr, ir.Shape{c, r}
	}
	s := w.Source
	cut, cs, err := nn.Share{Axis: s.Axis, Parts: s.Parts, Blocks: s.Blocks, Pad: s.Pad}.Cut(data, ws, d, pf.Devices)
	if err != nil {
		t.Fatal(err)
	}
	var buf codegen.BufferEntry
	for _, b := range pf.Buffers {
		if b.Name == w.Buffer {
			buf = b
		}
	}
	dt, _ = ir.ParseDType(buf.DType)
	return cut, dt, cs.Rows2D(), cs.Cols2D()
}

func TestConvertForms(t *testing.T) {
	f := setup(t)
	for _, form := range []checkpoint.Form{checkpoint.FormBF16, checkpoint.FormFP8, checkpoint.FormNVFP4} {
		t.Run(string(form), func(t *testing.T) {
			if form != checkpoint.FormBF16 {
				longtest.Skip(t, "an FP8 or NVFP4 checkpoint converted (~6 CPU-s each)")
			}
			dir := write(t, f, form)
			src, err := checkpoint.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			cache := filepath.Join(t.TempDir(), "cache")
			var last checkpoint.Progress
			man, reused, err := checkpoint.ConvertCache(src, f.pf, cache, func(p checkpoint.Progress) { last = p })
			if err != nil {
				t.Fatal(err)
			}
			if reused || !last.Final || last.TensorsDone != len(f.pf.Weights) || len(man.Tensors) != len(f.pf.Weights) {
				t.Fatalf("reused %v, last progress %+v, %d entries; want a fresh conversion of %d weights", reused, last, len(man.Tensors), len(f.pf.Weights))
			}
			kinds := map[checkpoint.Kind]int{}
			for _, e := range man.Tensors {
				kinds[e.Storage]++
			}
			t.Logf("storage kinds: %v", kinds)
			if form == checkpoint.FormNVFP4 && kinds[checkpoint.NVFP4] == 0 || form == checkpoint.FormFP8 && kinds[checkpoint.FP8] == 0 {
				t.Errorf("no quantised weights read: %v", kinds)
			}
			c, err := checkpoint.LoadCache(cache)
			if err != nil {
				t.Fatal(err)
			}
			bufs := map[string]codegen.BufferEntry{}
			for _, b := range f.pf.Buffers {
				bufs[b.Name] = b
			}
			for _, w := range f.pf.Weights {
				for d := 0; d < f.pf.Devices; d++ {
					b, ok := c.Buffer(d, w.Buffer)
					if !ok {
						t.Fatalf("no %q on device %d", w.Buffer, d)
					}
					be := bufs[w.Buffer]
					dt, _ := ir.ParseDType(be.DType)
					sh := ir.Shape(be.Shape)
					u, err := numerics.UnpackTiles(dt, b)
					if err != nil {
						t.Fatal(err)
					}
					got := numerics.Untilize(u, sh.Rows2D(), sh.Cols2D())
					// slices.Equal first: go-cmp walks large slices element
					// by element through reflection (most of this test's CPU).
					if want := expected(t, src, f.pf, w, d); !slices.Equal(want, got) {
						t.Fatalf("%s device %d (-want +got):\n%.2000s", w.Buffer, d, cmp.Diff(want, got))
					}
				}
			}
			// unchanged inputs: reused
			if _, reused, err := checkpoint.ConvertCache(src, f.pf, cache, nil); err != nil || !reused {
				t.Errorf("second conversion: reused %v, err %v; want reused", reused, err)
			}
		})
	}
}

// TestResume: a conversion interrupted after half the buffers resumes
// from the partial files and produces the same bytes.
func TestResume(t *testing.T) {
	f := setup(t)
	dir := write(t, f, checkpoint.FormNVFP4)
	src, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cache := filepath.Join(t.TempDir(), "cache")
	if _, _, err := checkpoint.ConvertCache(src, f.pf, cache, nil); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(cache, "device-1.bin"))
	manBytes, _ := os.ReadFile(filepath.Join(cache, checkpoint.ManifestFile))
	// Simulate a kill after half the buffers: partial manifest with the
	// first half, partial device files holding a bit more than that.
	half := len(f.pf.Weights) / 2
	man, err := checkpoint.LoadCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	m := *man.Manifest
	m.Complete, m.Tensors = false, m.Tensors[:half]
	end := m.Tensors[half-1].Offset + m.Tensors[half-1].Size
	for d := 0; d < f.pf.Devices; d++ {
		p := filepath.Join(cache, "device-"+string(rune('0'+d))+".bin")
		if err := os.Truncate(p, end+100); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p, p+".partial"); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(cache, checkpoint.ManifestFile))
	writeJSON(t, filepath.Join(cache, checkpoint.ManifestFile+".partial"), &m)
	skipped := 0
	if _, reused, err := checkpoint.ConvertCache(src, f.pf, cache, func(p checkpoint.Progress) {
		if p.Skipped {
			skipped++
		}
	}); err != nil || reused {
		t.Fatalf("resume: reused %v, err %v", reused, err)
	}
	if skipped != half {
		t.Errorf("resume skipped %d buffers, want %d", skipped, half)
	}
	got, _ := os.ReadFile(filepath.Join(cache, "device-1.bin"))
	if !bytes.Equal(want, got) {
		t.Errorf("resumed device file differs (%d vs %d bytes)", len(got), len(want))
	}
	gotMan, _ := os.ReadFile(filepath.Join(cache, checkpoint.ManifestFile))
	if diff := cmp.Diff(string(manBytes), string(gotMan)); diff != "" {
		t.Errorf("manifest (-want +got):\n%.1000s", diff)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "*.partial")); len(m) != 0 {
		t.Errorf("partial files left: %v", m)
	}
}

// TestFailureMidConversion: a tensor whose shape does not fit its buffer
// fails after earlier buffers were written, and nothing is left behind.
func TestFailureMidConversion(t *testing.T) {
	f := setup(t)
	hf := append([]checkpoint.HFTensor(nil), f.hf...)
	for i, h := range hf {
		if h.Name == "lm_head.weight" {
			hf[i].Shape = []int{h.Shape[0] * 2, h.Shape[1] / 2}
		}
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := checkpoint.WriteSynthetic(dir, f.cfg, checkpoint.FormBF16, hf, 2); err != nil {
		t.Fatal(err)
	}
	src, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cache := filepath.Join(t.TempDir(), "cache")
	done := 0
	_, _, err = checkpoint.ConvertCache(src, f.pf, cache, func(p checkpoint.Progress) { done = p.TensorsDone })
	if err == nil || !strings.Contains(err.Error(), `"lm_head.weight"`) || !strings.Contains(err.Error(), "programs.json declares shape") {
		t.Fatalf("got %v, want a shape error naming lm_head.weight", err)
	}
	if done == 0 {
		t.Errorf("the failure came before any buffer was converted; want it mid-conversion")
	}
	if _, serr := os.Stat(cache); serr == nil {
		entries, _ := os.ReadDir(cache)
		t.Errorf("cache directory left behind with %d entries", len(entries))
	}
}

// TestBadCheckpoints: clear errors, no cache directory left behind.
func TestBadCheckpoints(t *testing.T) {
	f := setup(t)
	for _, tt := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  string
	}{
		{"truncated shard", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model-00002-of-00002.safetensors")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-10)
		}, "truncated"},
		{"missing shard", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model-00001-of-00002.safetensors"))
		}, "missing shard"},
		{"missing tensor", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors.index.json")
			b, _ := os.ReadFile(p)
			s := strings.Replace(string(b), `"lm_head.weight"`, `"lm_head.weightX"`, 1)
			os.WriteFile(p, []byte(s), 0o644)
		}, `no such tensor`},
		{"unknown quantisation format", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "config.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "nvfp4-pack-quantized", "mxfp4-pack-quantized")), 0o644)
		}, "not supported"},
		{"quantised without config", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "config.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"quantization_config"`, `"quantization_config_x"`, 1)), 0o644)
		}, "declares no quantization_config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := write(t, f, checkpoint.FormNVFP4)
			tt.spoil(t, dir)
			cache := filepath.Join(t.TempDir(), "cache")
			src, err := checkpoint.Open(dir)
			if err == nil {
				_, _, err = checkpoint.ConvertCache(src, f.pf, cache, nil)
				src.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			t.Log(err)
			if _, serr := os.Stat(cache); serr == nil {
				t.Errorf("cache directory %s left behind", cache)
			}
		})
	}
}

// TestFlatNames: a text-only checkpoint ("model.layers.N…", with extra
// mtp.* tensors) converts to the same bytes as the nested spelling, and
// the extra tensors are reported unused.
func TestFlatNames(t *testing.T) {
	f := setup(t)
	nested := write(t, f, checkpoint.FormBF16)
	var flat []checkpoint.HFTensor
	for _, h := range f.hf {
		h.Name = strings.Replace(h.Name, "model.language_model.", "model.", 1)
		flat = append(flat, h)
	}
	flat = append(flat, checkpoint.HFTensor{Name: "mtp.fc.weight", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}})
	flatDir := filepath.Join(t.TempDir(), "flat")
	if err := checkpoint.WriteSynthetic(flatDir, f.cfg, checkpoint.FormBF16, flat, 2); err != nil {
		t.Fatal(err)
	}
	var devs [2][]byte
	for i, dir := range []string{nested, flatDir} {
		src, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		c, err := checkpoint.InMemory(src, f.pf)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range f.pf.Weights {
			b, _ := c.Buffer(1, w.Buffer)
			devs[i] = append(devs[i], b...)
		}
		items, _ := src.Plan(f.pf)
		unused := src.Unused(items)
		if want := []string{"mtp.fc.weight"}; i == 1 && !cmp.Equal(want, unused) {
			t.Errorf("unused: got %v, want %v", unused, want)
		}
		src.Close()
	}
	if len(devs[0]) == 0 || !bytes.Equal(devs[0], devs[1]) {
		t.Errorf("flat and nested checkpoints convert differently (%d vs %d bytes)", len(devs[0]), len(devs[1]))
	}
}

// TestNonFinite: a NaN or Inf in a source tensor fails its buffer's
// conversion, naming the buffer, tensor and element (once, not per
// device); AllowNonFinite converts it as it is.
func TestNonFinite(t *testing.T) {
	f := setup(t)
	bad := []struct {
		tensor string
		idx    int
		v      float32
		want   string
	}{
		{"model.language_model.norm.weight", 3, float32(math.Inf(-1)), `source "model.language_model.norm.weight" element [3] is -Inf; weights must be finite (--allow-nonfinite converts them as they are)`},
		{"lm_head.weight", 70, float32(math.NaN()), `source "lm_head.weight" element [%d, %d] is NaN`},
	}
	hf := append([]checkpoint.HFTensor(nil), f.hf...)
	for k, b := range bad {
		i := slices.IndexFunc(hf, func(h checkpoint.HFTensor) bool { return h.Name == b.tensor })
		if i < 0 {
			t.Fatalf("no tensor %s", b.tensor)
		}
		hf[i].Data = slices.Clone(hf[i].Data)
		hf[i].Data[b.idx] = b.v
		if sh := hf[i].Shape; len(sh) == 2 {
			bad[k].want = fmt.Sprintf(b.want, b.idx/sh[1], b.idx%sh[1])
		}
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := checkpoint.WriteSynthetic(dir, f.cfg, checkpoint.FormBF16, hf, 1); err != nil {
		t.Fatal(err)
	}
	src, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	items, err := src.Plan(f.pf)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		i := slices.IndexFunc(items, func(it checkpoint.Item) bool { return it.Source.Tensor == b.tensor })
		if i < 0 {
			t.Fatalf("no buffer reads %s", b.tensor)
		}
		it := items[i]
		ws := make([]io.WriterAt, f.pf.Devices)
		for d := range ws {
			ws[d] = make(sink, it.Bytes())
		}
		src.AllowNonFinite = false
		err := src.Convert(it, ws)
		if err == nil || !strings.Contains(err.Error(), b.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one error containing %q", b.tensor, err, b.want)
		}
		src.AllowNonFinite = true
		if err := src.Convert(it, ws); err != nil {
			t.Errorf("%s with AllowNonFinite: %v", b.tensor, err)
		}
	}
}

// sink is a fixed-size in-memory WriterAt.
type sink []byte

func (s sink) WriteAt(p []byte, off int64) (int, error) { return copy(s[off:], p), nil }

// TestReplaceCache: converting over a complete cache from changed
// source bytes builds beside it: a failed conversion and an interrupted
// one leave the old cache loadable and unchanged, the next conversion
// resumes the interrupted one, and only its complete result replaces
// the old cache.
func TestReplaceCache(t *testing.T) {
	f := setup(t)
	good := write(t, f, checkpoint.FormBF16)
	cache := filepath.Join(t.TempDir(), "cache")
	convert := func(dir string, progress func(checkpoint.Progress)) error {
		src, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		src.ModelConfig = f.cfg
		_, _, err = checkpoint.ConvertCache(src, f.pf, cache, progress)
		return err
	}
	if err := convert(good, nil); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(cache, "device-0.bin"))
	intact := func(when string) {
		t.Helper()
		if _, err := checkpoint.LoadCache(cache); err != nil {
			t.Fatalf("%s: the old cache is broken: %v", when, err)
		}
		if got, _ := os.ReadFile(filepath.Join(cache, "device-0.bin")); !bytes.Equal(got, want) {
			t.Fatalf("%s: the old cache's device-0.bin changed", when)
		}
	}
	spoilt := func(edit func(h *checkpoint.HFTensor)) string {
		hf := append([]checkpoint.HFTensor(nil), f.hf...)
		i := slices.IndexFunc(hf, func(h checkpoint.HFTensor) bool { return h.Name == "model.language_model.embed_tokens.weight" })
		hf[i].Data = slices.Clone(hf[i].Data)
		edit(&hf[i])
		dir := filepath.Join(t.TempDir(), "ckpt")
		if err := checkpoint.WriteSynthetic(dir, f.cfg, checkpoint.FormBF16, hf, 1); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// A failed conversion: a NaN in the embedding.
	bad := spoilt(func(h *checkpoint.HFTensor) { h.Data[5] = float32(math.NaN()) })
	if err := convert(bad, nil); err == nil || !strings.Contains(err.Error(), "embed_tokens.weight\" element [0, 5] is NaN") {
		t.Fatalf("bad checkpoint: %v", err)
	}
	intact("after a failed conversion")
	// The same bytes under another shape are another tensor: not reused.
	reshaped := spoilt(func(h *checkpoint.HFTensor) { h.Shape = []int{h.Shape[1], h.Shape[0]} })
	src, err := checkpoint.Open(reshaped)
	if err != nil {
		t.Fatal(err)
	}
	src.ModelConfig = f.cfg
	if _, reused, err := checkpoint.ConvertCache(src, f.pf, cache, nil); reused || err == nil {
		t.Errorf("a checkpoint whose embedding has the same bytes under a transposed shape: reused %v, err %v; want it converted (and refused: the shape is not the model's)", reused, err)
	}
	src.Close()
	intact("after a refused reshaped checkpoint")
	// Changed source bytes: a kill after three buffers (simulated by a
	// panic out of the progress callback).
	changed := spoilt(func(h *checkpoint.HFTensor) { h.Data[0] += 1 })
	func() {
		defer func() { recover() }()
		convert(changed, func(p checkpoint.Progress) {
			if p.TensorsDone == 3 {
				panic("killed")
			}
		})
	}()
	intact("after an interrupted conversion")
	// The interrupted conversion resumes and replaces the cache.
	skipped := 0
	if err := convert(changed, func(p checkpoint.Progress) {
		if p.Skipped {
			skipped++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if skipped != 3 {
		t.Errorf("resumed %d buffers, want 3", skipped)
	}
	if got, _ := os.ReadFile(filepath.Join(cache, "device-0.bin")); bytes.Equal(got, want) {
		t.Errorf("the cache was not replaced")
	}
	c, err := checkpoint.LoadCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	// The model config the build was made with is recorded.
	if cfg, _ := os.ReadFile(filepath.Join(cache, checkpoint.ConfigFile)); c.Manifest.Config != checkpoint.ConfigFile || !bytes.Equal(cfg, f.cfg) {
		t.Errorf("manifest config %q, config.json %d bytes; want the build's config (%d bytes)", c.Manifest.Config, len(cfg), len(f.cfg))
	}
	ents, _ := os.ReadDir(filepath.Dir(cache))
	for _, e := range ents {
		if e.Name() != "cache" {
			t.Errorf("%s left beside the cache", e.Name())
		}
	}
}
