package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
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
	var format string
	cmd := &cobra.Command{
		Use:   "inspect DIR",
		Short: "List a checkpoint's tensors: dtype, shape, bytes, shard and quantisation",
		Long: `List the tensors of the checkpoint in DIR (safetensors, sharded or not): name,
dtype, shape, size and the file holding it, then the totals per dtype, and
the quantization_config of its config.json (method, format, block or group
size, and how many modules it leaves unquantised: --format json lists them).

--format json prints {dir, files[], quantization {method, fmt, format,
weight_block_size, group_size, ignore[]} (null: none), tensors[] {name, dtype,
shape, bytes, file}, bytes, bytes_by_dtype}; sizes are bytes.

  tcc weights inspect DIR
  tcc weights inspect DIR --format json | jq '.tensors[] | select(.dtype == "F8_E4M3") | .name'`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if format != "table" && format != "json" {
			return fmt.Errorf("unknown --format %q (want table or json)", format)
		}
		src, err := checkpoint.Open(args[0])
		if err != nil {
			return err
		}
		defer src.Close()
		in := inspectCheckpoint(args[0], src)
		w := cmd.OutOrStdout()
		if format == "json" {
			b, err := json.MarshalIndent(in, "", "  ")
			if err != nil {
				return err
			}
			_, err = w.Write(append(b, '\n'))
			return err
		}
		return in.writeTable(w)
	}
	return cmd
}

// inspection is what tcc weights inspect prints (--format json as is).
type inspection struct {
	Dir          string           `json:"dir"`
	Files        []string         `json:"files"`
	Quantization *inspectQuant    `json:"quantization"`
	Tensors      []inspectTensor  `json:"tensors"`
	Bytes        int64            `json:"bytes"`
	BytesByDType map[string]int64 `json:"bytes_by_dtype"`
}

type inspectQuant struct {
	Method    string   `json:"method"`
	Fmt       string   `json:"fmt,omitempty"`
	Format    string   `json:"format,omitempty"`
	BlockSize []int    `json:"weight_block_size,omitempty"`
	GroupSize int      `json:"group_size,omitempty"`
	Ignore    []string `json:"ignore"`
}

type inspectTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Bytes int64  `json:"bytes"`
	File  string `json:"file"`
}

func inspectCheckpoint(dir string, src *checkpoint.Source) *inspection {
	in := &inspection{Dir: dir, Files: []string{}, Tensors: []inspectTensor{}, BytesByDType: map[string]int64{}}
	for _, sh := range src.Ckpt.Shards {
		in.Files = append(in.Files, filepath.Base(sh.Path))
	}
	if q := src.Quant; q != nil {
		in.Quantization = &inspectQuant{Method: q.Method, Fmt: q.Fmt, Format: q.Format, BlockSize: q.BlockSize, GroupSize: q.GroupSize, Ignore: append([]string{}, q.Ignore...)}
	}
	for _, n := range src.Ckpt.Names() {
		t, file, _ := src.Ckpt.Info(n)
		b := t.End - t.Begin
		in.Bytes += b
		in.BytesByDType[string(t.DType)] += b
		in.Tensors = append(in.Tensors, inspectTensor{Name: n, DType: string(t.DType), Shape: append([]int{}, t.Shape...), Bytes: b, File: filepath.Base(file)})
	}
	return in
}

// writeTable prints the quantisation (the ignore list as a count and its
// first names), one row per tensor with a human size, and the totals.
func (in *inspection) writeTable(w io.Writer) error {
	if q := in.Quantization; q == nil {
		fmt.Fprintf(w, "quantization: none\n")
	} else {
		what := fmt.Sprintf("%s %s, group size %d", q.Method, q.Format, q.GroupSize)
		if q.Method == "fp8" {
			what = fmt.Sprintf("fp8 %s, weight_block_size %v", q.Fmt, q.BlockSize)
		}
		fmt.Fprintf(w, "quantization: %s, %s\n", what, ignoreSummary(q.Ignore))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tensor\tdtype\tshape\tsize\tfile")
	for _, t := range in.Tensors {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.DType, fmt.Sprint(t.Shape), target.HumanBytes(t.Bytes), t.File)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var dts []string
	for d, b := range in.BytesByDType {
		dts = append(dts, fmt.Sprintf("%s %s", d, target.HumanBytes(b)))
	}
	sort.Strings(dts)
	fmt.Fprintf(w, "%d tensors in %d files, %s (%s)\n", len(in.Tensors), len(in.Files), target.HumanBytes(in.Bytes), strings.Join(dts, ", "))
	return nil
}

// ignoreSummary is "N modules left unquantised (first, second, ...)",
// at most three names.
func ignoreSummary(ignore []string) string {
	switch n := len(ignore); {
	case n == 0:
		return "no modules left unquantised"
	case n <= 3:
		return fmt.Sprintf("%d left unquantised (%s)", n, strings.Join(ignore, ", "))
	default:
		return fmt.Sprintf("%d modules left unquantised (%s, ... ; --format json lists them)", n, strings.Join(ignore[:3], ", "))
	}
}

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
				if !src.Ckpt.Has(n) && strings.Contains(err.Error(), "missing tensor") {
					return fmt.Errorf("%w%s (tcc weights inspect %s lists them)", err, didYouMean(n, weightNames(src)), args[0])
				}
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
		fmt.Fprintf(cmd.OutOrStdout(), "%d tensors dequantised to float32 -> %s (%s)\n", len(ts), out, target.HumanBytes(int64(len(enc))))
		return nil
	}
	return cmd
}

// weightNames are the names dequant accepts: the checkpoint's tensors,
// with an NVFP4 weight's parts (NAME_packed, NAME_scale, ...) named by
// their weight (NAME).
func weightNames(src *checkpoint.Source) []string {
	var out []string
	for _, n := range src.Ckpt.Names() {
		if base, ok := strings.CutSuffix(n, ".weight_packed"); ok {
			n = base + ".weight"
		}
		out = append(out, n)
	}
	return out
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
		var bytes int64
		for _, e := range man.Tensors {
			bytes += e.Size * int64(man.Devices)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d weight buffers, %s on %d devices -> %s (%.1fs)\n", model, len(man.Tensors), target.HumanBytes(bytes), man.Devices, out, time.Since(start).Seconds())
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
	t, err := mf.target()
	if err != nil {
		return nil, err
	}
	b, err := codegen.Compile(g, t)
	if err != nil {
		return nil, err
	}
	info, err := hostInfo(m, mf)
	if err != nil {
		return nil, err
	}
	return checkpoint.Programs(model, b, info)
}

// progress renders conversion progress: a bar redrawn to the terminal's
// width on a terminal, one line per buffer otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	width int // the terminal's columns (0: unknown, a 30-column bar)
	start time.Time
	drawn bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now()}
	p.tty, p.width = terminal(w)
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
		text := fmt.Sprintf(" %d/%d tensors  %s/%s  %s/s  ETA %s", e.TensorsDone, e.Tensors, target.HumanBytes(e.BytesDone), target.HumanBytes(e.Bytes), target.HumanBytes(int64(rate)), eta)
		// The bar takes what the text leaves of the line (10..60 columns),
		// so the line never wraps and \r redraws it in place.
		width := 30
		if p.width > 0 {
			width = min(60, max(10, p.width-len(text)-3))
		}
		fill := 0
		if e.Bytes > 0 {
			fill = int(int64(width) * e.BytesDone / e.Bytes)
		}
		fmt.Fprintf(p.w, "\r[%s%s]%s\x1b[K", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), text)
		p.drawn = true
		return
	}
	verb := "converted"
	if e.Skipped {
		verb = "resumed"
	}
	fmt.Fprintf(p.w, "%s %d/%d %s (%s of %s, %s/s, ETA %s)\n", verb, e.TensorsDone, e.Tensors, e.Buffer, target.HumanBytes(e.BytesDone), target.HumanBytes(e.Bytes), target.HumanBytes(int64(rate)), eta)
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
