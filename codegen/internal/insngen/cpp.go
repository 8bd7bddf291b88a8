package insngen

import (
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"
	"github.com/tcc-dev/tcc/codegen/internal/insnspec"
)

// Declaration sections of tt_api.h: the syntax check replaces the line
// DeclMarker + section with the section's declarations.
const (
	DeclMarker      = "// tcc-insn-decls "
	SectionDataflow = "dataflow"
	SectionEth      = "eth"
	SectionCompute  = "compute"
)

// Decls returns the tt_api.h declarations of every instruction per
// section, in table order; the StubOnly declarations of one header are
// wrapped in "// tcc-header-begin HEADER" / "// tcc-header-end" lines.
func Decls(insns []insnspec.Insn) map[string]string {
	out := map[string]*strings.Builder{}
	add := func(sec, text string) {
		if out[sec] == nil {
			out[sec] = &strings.Builder{}
		}
		out[sec].WriteString(text + "\n")
	}
	stub := ""
	for _, in := range insns {
		if in.DMDecl != "" {
			sec := SectionDataflow
			if in.Class == insnspec.Eth {
				sec = SectionEth
			}
			add(sec, in.DMDecl)
		}
		if stub != "" && (!in.StubOnly || in.Header != stub) {
			add(SectionCompute, "// tcc-header-end")
			stub = ""
		}
		if in.ComputeDecl == "" {
			continue
		}
		if in.StubOnly && stub == "" {
			stub = in.Header
			add(SectionCompute, "// tcc-header-begin "+stub)
		}
		add(SectionCompute, in.ComputeDecl)
	}
	if stub != "" {
		add(SectionCompute, "// tcc-header-end")
	}
	m := map[string]string{}
	for k, b := range out {
		m[k] = b.String()
	}
	return m
}

// GenerateCPP returns the gofmt'ed source of codegen/cpp/insn_gen.go: the
// compute header of every compute call, the data-movement and ethernet
// call names, the argument list of every call statement and the
// declarations of tt_api.h's generated sections.
func GenerateCPP(insns []insnspec.Insn) ([]byte, error) {
	if err := check(insns); err != nil {
		return nil, err
	}
	f := jen.NewFile("cpp")
	f.HeaderComment(header)
	f.ImportName(kirPkg, "kir")

	// Headers and names.
	hdr := jen.Dict{}
	dm, eth := jen.Dict{}, jen.Dict{}
	for _, in := range insns {
		for _, c := range in.AllCalls() {
			switch in.Class {
			case insnspec.AnyKernel:
				hdr[jen.Lit(c)] = jen.Lit(in.Header)
				dm[jen.Lit(c)] = jen.True()
			case insnspec.Compute:
				hdr[jen.Lit(c)] = jen.Lit(in.Header)
			case insnspec.DataMovement:
				dm[jen.Lit(c)] = jen.True()
			case insnspec.Eth:
				eth[jen.Lit(c)] = jen.True()
			}
		}
	}
	f.Comment("insnComputeHeaders maps every compute call of the instruction table to")
	f.Comment("its header (the SFPU ops' calls come from kir.SFPUTable, see headers.go).")
	f.Var().Id("insnComputeHeaders").Op("=").Map(jen.String()).String().Values(hdr)
	f.Comment("insnDataflowNames lists the data-movement calls of the instruction table.")
	f.Var().Id("insnDataflowNames").Op("=").Map(jen.String()).Bool().Values(dm)
	f.Comment("ethNames lists the ethernet calls printed kernels may use; all come from")
	f.Comment("ethHeader (channel 0 of erisc_info, see kir/eth.go).")
	f.Var().Id("ethNames").Op("=").Map(jen.String()).Bool().Values(eth)

	// Argument lists.
	var cases []jen.Code
	for _, in := range insns {
		if !in.HasCall() {
			continue
		}
		t := jen.Qual(kirPkg, in.Go)
		if in.Printer != "" {
			cases = append(cases, jen.Case(t).Block(jen.Return(jen.Id("pr").Dot(in.Printer).Call(jen.Id("s")))))
			continue
		}
		args := jen.Nil()
		if len(in.Args) > 0 {
			var as []jen.Code
			for _, a := range in.Args {
				fd := in.Field(a)
				x := jen.Id("s").Dot(a)
				switch fd.Kind {
				case insnspec.CB:
					as = append(as, jen.Id("pr").Dot("cb").Call(x))
				case insnspec.Plain:
					as = append(as, jen.Id("boolArg").Call(x))
				case insnspec.L1Ptr:
					as = append(as, jen.Id("pr").Dot("l1Ptr").Call(x))
				default:
					as = append(as, jen.Id("pr").Dot("expr").Call(x))
				}
			}
			args = jen.Index().String().Values(as...)
		}
		cases = append(cases, jen.Case(t).Block(jen.Return(jen.Lit(""), args, jen.Lit(""))))
	}
	f.Comment("callArgs returns the template arguments, call arguments and trailing")
	f.Comment("comment of a call statement (failing for a statement that is not one).")
	f.Func().Params(jen.Id("pr").Op("*").Id("printer")).Id("callArgs").Params(jen.Id("s").Qual(kirPkg, "Stmt")).
		Params(jen.Id("tmpl").String(), jen.Id("args").Index().String(), jen.Id("comment").String()).Block(
		jen.Switch(jen.Id("s").Op(":=").Id("s").Assert(jen.Id("type"))).Block(cases...),
		jen.Id("pr").Dot("fail").Call(jen.Lit("statement %T has no printer support"), jen.Id("s")),
		jen.Return(jen.Lit(""), jen.Nil(), jen.Lit("")),
	)

	// Declarations.
	decls := Decls(insns)
	secs := make([]string, 0, len(decls))
	for s := range decls {
		secs = append(secs, s)
	}
	sort.Strings(secs)
	d := jen.Dict{}
	for _, s := range secs {
		d[jen.Lit(s)] = jen.Lit(decls[s])
	}
	f.Comment("insnDecls are the declarations of tt_api.h's generated sections: the line")
	f.Comment("\"" + DeclMarker + "SECTION\" is replaced by insnDecls[SECTION].")
	f.Var().Id("insnDecls").Op("=").Map(jen.String()).String().Values(d)
	f.Const().Id("declMarker").Op("=").Lit(DeclMarker)
	return render(f)
}
