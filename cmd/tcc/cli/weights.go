package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/models/safetensors"
	"github.com/tcc-dev/tcc/models/tokenizer"
)

func newWeightsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "weights",
		Short: "Inspect, dequantise and convert Hugging Face safetensors checkpoints",
		Long: `Read Hugging Face checkpoints (safetensors, sharded through
model.safetensors.index.json; bf16, FP8 e4m3 with block scales, or
compressed-tensors NVFP4, as config.json's quantization_config declares) and
turn them into device-ready weights for a build.

  tcc weights inspect DIR
  tcc weights dequant DIR NAME... -o FILE.safetensors
  tcc weights convert --from DIR --mesh 1x2 [--config FILE] -o CACHE
  tcc run qwen27b --mesh 1x2 --weights CACHE --check`,
	}
	cmd.AddCommand(newWeightsInspectCmd(), newWeightsDequantCmd(), newWeightsConvertCmd())
	return cmd
}

func newWeightsInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect DIR",
		Short: "List a checkpoint's tensors: dtype, shape, bytes, shard and quantisation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := checkpoint.Open(args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			w := cmd.OutOrStdout()
			q := src.Quant
			switch {
			case q == nil:
				fmt.Fprintf(w, "quantization: none\n")
			case q.Method == "fp8":
				fmt.Fprintf(w, "quantization: fp8 %s, weight_block_size %v, ignore %v\n", q.Fmt, q.BlockSize, q.Ignore)
			default:
				fmt.Fprintf(w, "quantization: %s %s, group size %d, ignore %v\n", q.Method, q.Format, q.GroupSize, q.Ignore)
			}
			var total int64
			names := src.Ckpt.Names()
			byDType := map[safetensors.DType]int64{}
			for _, n := range names {
				t, file, _ := src.Ckpt.Info(n)
				b := t.End - t.Begin
				total += b
				byDType[t.DType] += b
				fmt.Fprintf(w, "%-70s %-8s %-16s %12d  %s\n", n, t.DType, fmt.Sprint(t.Shape), b, filepath.Base(file))
			}
			var dts []string
			for d, b := range byDType {
				dts = append(dts, fmt.Sprintf("%s %s", d, mb(b)))
			}
			sort.Strings(dts)
			fmt.Fprintf(w, "%d tensors in %d files, %s (%s)\n", len(names), len(src.Ckpt.Shards), mb(total), strings.Join(dts, ", "))
			return nil
		},
	}
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

func newWeightsDequantCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "dequant DIR NAME...",
		Short: "Write the named weights dequantised to float32 in their HF layout",
		Long: `Dequantise the named weights of the checkpoint in DIR (FP8, NVFP4 or plain;
NAME is the weight's name, e.g. model.language_model.layers.3.mlp.up_proj.weight
for an NVFP4 weight stored as ...up_proj.weight_packed) and write them as F32
tensors of their HF shape to one safetensors file, written atomically.`,
		Args: cobra.MinimumNArgs(2),
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output .safetensors file (required)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := notStdout(out, "a .safetensors file atomically"); err != nil {
			return err
		}
		if out == "" {
			return fmt.Errorf("weights dequant: -o FILE.safetensors is required")
		}
		src, err := checkpoint.Open(args[0])
		if err != nil {
			return err
		}
		defer src.Close()
		var ts []safetensors.Tensor
		for _, n := range args[1:] {
			data, shape, err := src.Float32(n)
			if err != nil {
				return err
			}
			b, _ := safetensors.FromFloat32(safetensors.F32, data)
			ts = append(ts, safetensors.Tensor{Name: n, DType: safetensors.F32, Shape: shape, Data: b})
		}
		enc, err := safetensors.Encode(ts, map[string]string{"format": "pt", "tcc": "dequantised from " + args[0]})
		if err != nil {
			return err
		}
		if err := codegen.WriteFileAtomic(out, enc); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%d tensors dequantised to float32 -> %s (%s)\n", len(ts), out, mb(int64(len(enc))))
		return nil
	}
	return cmd
}

func newWeightsConvertCmd() *cobra.Command {
	var from, out, model string
	var allowNF bool
	cmd := &cobra.Command{
		Use:   "convert --from DIR -o CACHE",
		Short: "Convert a checkpoint into a device-ready weight cache for a build",
		Long: `Build MODEL (default qwen27b; --config defaults to DIR/config.json when
present) for --mesh, and convert every weight buffer its programs.json
declares from the checkpoint in DIR: dequantise, transpose, pad and cut per
device as the buffer's source says, tilize and pack into the buffer's dtype
with tt-metal's host packer. CACHE gets one file per device and manifest.json
with sha256 checksums of the source tensors and results, and the model config
the build used (config.json, which tcc run --weights CACHE builds with) and
the checkpoint's tokenizer files (tokenizer.json, tokenizer_config.json,
generation_config.json: tcc run --weights CACHE --prompt reads them). An
interrupted conversion resumes; an unchanged one is reused; a failed one
leaves nothing. Over a complete cache that cannot be reused the new one is
converted in .CACHE.staging beside it and swapped in when complete.
--dtype-policy fast|accurate picks the weight dtypes (bfp4_b or bfp8_b MLP
gate/up). A NaN or Inf in a source weight is an error naming the tensor and
element; --allow-nonfinite converts such values as they are.`,
		Args: cobra.NoArgs,
	}
	mf := addModelFlags(cmd, "fused")
	fs := cmd.Flags()
	fs.StringVar(&from, "from", "", "checkpoint directory (required)")
	fs.StringVarP(&out, "out", "o", "", "cache directory (required)")
	fs.StringVar(&model, "model", "qwen27b", "model the checkpoint is for")
	fs.BoolVar(&allowNF, "allow-nonfinite", false, "convert NaN and Inf source values as they are instead of failing")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := notStdout(out, "a cache directory"); err != nil {
			return err
		}
		if from == "" || out == "" {
			return fmt.Errorf("weights convert: --from DIR and -o CACHE are required")
		}
		if err := mf.checkStage(); err != nil {
			return err
		}
		if !mf.flags.Changed("config") {
			if p := filepath.Join(from, "config.json"); fileExists(p) {
				mf.params["config"].s = p
				mf.flags.Lookup("config").Changed = true
			}
		}
		src, err := checkpoint.Open(from)
		if err != nil {
			return err
		}
		defer src.Close()
		src.AllowNonFinite = allowNF
		if p := mf.params["config"]; p != nil && p.s != "" {
			if src.ModelConfig, err = os.ReadFile(p.s); err != nil {
				return err
			}
		}
		pf, err := contractFor(mf, model)
		if err != nil {
			return err
		}
		items, err := src.Plan(pf)
		if err != nil {
			return err
		}
		if unused := src.Unused(items); len(unused) > 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "skipping %d checkpoint tensors the build does not read (first: %s)\n", len(unused), unused[0])
		}
		start := time.Now()
		pr := newProgress(cmd.ErrOrStderr())
		man, reused, err := checkpoint.ConvertCache(src, pf, out, pr.report)
		pr.done()
		if err != nil {
			return err
		}
		if err := copyTokenizer(from, out); err != nil {
			return err
		}
		if reused {
			fmt.Fprintf(cmd.OutOrStdout(), "%s is up to date: %d weight buffers on %d devices (inputs unchanged)\n", out, len(man.Tensors), man.Devices)
			return nil
		}
		var size int64
		for _, e := range man.Tensors {
			size += e.Size * int64(man.Devices)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d weight buffers, %s on %d devices -> %s (%.1fs)\n", model, len(man.Tensors), mb(size), man.Devices, out, time.Since(start).Seconds())
		return nil
	}
	return cmd
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// copyTokenizer copies the tokenizer files of checkpoint dir from into
// cache out (those it has), so that --prompt runs on the cache.
func copyTokenizer(from, out string) error {
	for _, f := range []string{tokenizer.File, tokenizer.ConfigFile, tokenizer.GenerationConfigFile} {
		data, err := os.ReadFile(filepath.Join(from, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := codegen.WriteFileAtomic(filepath.Join(out, f), data); err != nil {
			return err
		}
	}
	return nil
}

// contractFor builds model with mf's flags (the pipeline stage included)
// and returns its programs.json weight contract.
func contractFor(mf *modelFlags, model string) (*codegen.ProgramsFile, error) {
	m, g, _, err := mf.graphFor(model)
	if err != nil {
		return nil, err
	}
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		return nil, err
	}
	info, err := hostInfo(m, mf)
	if err != nil {
		return nil, err
	}
	return checkpoint.Programs(model, b, info)
}

// progress renders conversion progress: a redrawn bar on a terminal,
// one line per buffer otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	drawn bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) report(e checkpoint.Progress) {
	if e.Reused || (e.Final && !p.tty) {
		return
	}
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(e.BytesDone) / el
	}
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(e.Bytes-e.BytesDone)/rate) * time.Second).Round(time.Second).String()
	}
	if p.tty {
		const width = 30
		fill := 0
		if e.Bytes > 0 {
			fill = int(width * e.BytesDone / e.Bytes)
		}
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d tensors  %s/%s  %.1f MB/s  ETA %s   ", strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
			e.TensorsDone, e.Tensors, mb(e.BytesDone), mb(e.Bytes), rate/1e6, eta)
		p.drawn = true
		return
	}
	verb := "converted"
	if e.Skipped {
		verb = "resumed"
	}
	fmt.Fprintf(p.w, "%s %d/%d %s (%s of %s, %.1f MB/s, ETA %s)\n", verb, e.TensorsDone, e.Tensors, e.Buffer, mb(e.BytesDone), mb(e.Bytes), rate/1e6, eta)
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
