//go:build linux

package checkpoint_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/models/safetensors"
)

// fullLayerConfig is the 27B text config cut to one (GDN) layer: the
// full-size embedding, one layer, the full lm_head.
func fullLayerConfig(t testing.TB) []byte {
	data, err := os.ReadFile("../config/qwen27b.json")
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	tc := top["text_config"].(map[string]any)
	tc["num_hidden_layers"] = 1
	tc["layer_types"] = []string{"linear_attention"}
	out, _ := json.MarshalIndent(top, "", "  ")
	return out
}

// xorshift fills bf16 values with random signs, exponents 2^-7..2^-1 and
// mantissas (no float math: a 2.5 GB embedding writes in seconds).
type xorshift uint64

func (x *xorshift) next() uint64 { *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17; return uint64(*x) }

func fillRandom(t safetensors.Tensor, w io.Writer, x *xorshift) error {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= int64(d)
	}
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(int64(len(buf)), n)
		for i := int64(0); i+1 < k; i += 2 {
			r := x.next()
			switch t.DType {
			case safetensors.BF16:
				v := uint16(r>>48)&0x807F | uint16(120+r%7)<<7
				buf[i], buf[i+1] = byte(v), byte(v>>8)
			case safetensors.F8E4M3:
				buf[i], buf[i+1] = byte(0x30+r%8), byte(0x30+(r>>8)%8)
			default:
				buf[i], buf[i+1] = byte(r), byte(r>>8)
			}
		}
		if t.DType == safetensors.F32 { // scalars and small vectors: 1.0
			for i := int64(0); i+3 < k; i += 4 {
				buf[i], buf[i+1], buf[i+2], buf[i+3] = 0, 0, 0x80, 0x3f
			}
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// writeFullLayer writes the one-layer full-size checkpoint in form into
// dir as two shards (embedding and lm_head; the layer), streaming.
func writeFullLayer(t testing.TB, dir string, form checkpoint.Form) {
	os.MkdirAll(dir, 0o755)
	cfg := fullLayerConfig(t)
	var top map[string]any
	json.Unmarshal(cfg, &top)
	if form == checkpoint.FormNVFP4 {
		top["quantization_config"] = map[string]any{"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": []string{"lm_head"}}
	}
	cfg, _ = json.MarshalIndent(top, "", "  ")
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	m := qwen27b.Model{}
	args, err := models.DefaultArgs(m, map[string]string{"config": cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := m.HostInfo(args)
	shards := [2][]safetensors.Tensor{}
	for _, v := range g.Weights {
		src, _ := info.WeightSource(v.Name, 1)
		s := []int(v.Type.Shape.Clone())
		if src.Transposed {
			s = []int{s[1], s[0]}
			if strings.HasSuffix(src.Tensor, "conv1d.weight") {
				s = []int{s[0], 1, s[1]}
			}
		}
		k := 1
		if strings.Contains(src.Tensor, "embed_tokens") || src.Tensor == "lm_head.weight" {
			k = 0
		}
		base := strings.TrimSuffix(src.Tensor, ".weight")
		switch {
		case form == checkpoint.FormNVFP4 && strings.Contains(src.Tensor, ".mlp."):
			shards[k] = append(shards[k],
				safetensors.Tensor{Name: base + ".weight_packed", DType: safetensors.U8, Shape: []int{s[0], s[1] / 2}},
				safetensors.Tensor{Name: base + ".weight_scale", DType: safetensors.F8E4M3, Shape: []int{s[0], s[1] / 16}},
				safetensors.Tensor{Name: base + ".weight_global_scale", DType: safetensors.F32, Shape: []int{1}})
		default:
			shards[k] = append(shards[k], safetensors.Tensor{Name: src.Tensor, DType: safetensors.BF16, Shape: s})
		}
	}
	wm := map[string]string{}
	x := xorshift(88172645463325252)
	for i, ts := range shards {
		name := fmt.Sprintf("model-%05d-of-00002.safetensors", i+1)
		if err := safetensors.WriteStream(filepath.Join(dir, name), ts, func(t safetensors.Tensor, w io.Writer) error { return fillRandom(t, w, &x) }); err != nil {
			t.Fatal(err)
		}
		for _, t := range ts {
			wm[t.Name] = name
		}
	}
	idx, _ := json.Marshal(map[string]any{"weight_map": wm})
	os.WriteFile(filepath.Join(dir, safetensors.IndexFile), idx, 0o644)
}

// TestConvertChild is the benchmark's child process: it converts one
// checkpoint into one cache at mesh 1x2 and prints the source bytes and
// the seconds the conversion took, so the parent can read its peak RSS.
func TestConvertChild(t *testing.T) {
	spec := os.Getenv("TCC_CONVERT_CHILD")
	if spec == "" {
		t.Skip("run by BenchmarkConvertFullLayer")
	}
	ckpt, cache, _ := strings.Cut(spec, "|")
	m := qwen27b.Model{}
	args, err := models.DefaultArgs(m, map[string]string{"config": filepath.Join(ckpt, "config.json")})
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
	info, _ := m.HostInfo(args)
	pf, err := checkpoint.Programs(m.Name(), b, info)
	if err != nil {
		t.Fatal(err)
	}
	src, err := checkpoint.Open(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("CONTRACT peak RSS %d MiB\n", ru.Maxrss/1024)
	start := time.Now()
	var total int64
	man, _, err := checkpoint.ConvertCache(src, pf, cache, func(p checkpoint.Progress) { total = p.Bytes })
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("CHILD source_bytes=%d seconds=%f buffers=%d\n", total, time.Since(start).Seconds(), len(man.Tensors))
}

// BenchmarkConvertFullLayer converts a synthetic checkpoint of the
// full-size embedding, one full-size GDN layer and the full lm_head (bf16,
// and NVFP4 MLP) at mesh 1x2 in a child process, reporting source MB/s
// and the child's peak RSS (which includes building the contract).
func BenchmarkConvertFullLayer(b *testing.B) {
	for _, form := range []checkpoint.Form{checkpoint.FormBF16, checkpoint.FormNVFP4} {
		b.Run(string(form), func(b *testing.B) {
			dir := b.TempDir()
			ckpt := filepath.Join(dir, "ckpt")
			writeFullLayer(b, ckpt, form)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cache := filepath.Join(dir, fmt.Sprintf("cache%d", i))
				cmd := exec.Command(os.Args[0], "-test.run=^TestConvertChild$", "-test.v")
				cmd.Env = append(os.Environ(), "TCC_CONVERT_CHILD="+ckpt+"|"+cache)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("child: %v\n%s", err, out)
				}
				var bytes int64
				var secs float64
				var bufs int
				line := string(out[strings.Index(string(out), "CHILD"):])
				if i := strings.Index(string(out), "CONTRACT"); i >= 0 {
					b.Log(strings.SplitN(string(out[i:]), "\n", 2)[0])
				}
				fmt.Sscanf(line, "CHILD source_bytes=%d seconds=%f buffers=%d", &bytes, &secs, &bufs)
				rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
				b.ReportMetric(float64(bytes)/1e6/secs, "MB/s")
				b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
				b.ReportMetric(float64(bytes)/1e6, "source-MB")
				os.RemoveAll(cache)
			}
		})
	}
}
