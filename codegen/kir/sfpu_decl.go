package kir

import (
	"fmt"
	"strings"
	"sync"
)

// CDecl is one C++ function declaration of an SFPUSpec.Decl.
type CDecl struct {
	Name     string
	Template []CParam // template parameters in order; nil when not a template
	Params   []CParam // function parameters in order
}

// CParam is one parameter of a CDecl: its type, name and default value
// ("" when it has none), as written.
type CParam struct {
	Type, Name, Default string
}

// ParseDecls parses declaration text of the form SFPUSpec.Decl holds:
// `//` comments, and declarations `[template <PARAMS>] RET NAME(PARAMS);`.
// It returns the declarations in order, or an error naming the first one it
// cannot read.
func ParseDecls(text string) ([]CDecl, error) {
	var code strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		code.WriteString(line)
		code.WriteByte(' ')
	}
	var out []CDecl
	for stmt := range strings.SplitSeq(code.String(), ";") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		d, err := parseDecl(stmt)
		if err != nil {
			return nil, fmt.Errorf("declaration %q: %w", stmt, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseDecl(s string) (CDecl, error) {
	var d CDecl
	if rest, ok := strings.CutPrefix(s, "template"); ok {
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "<") {
			return d, fmt.Errorf("template without <")
		}
		end := closing(rest, '<', '>')
		if end < 0 {
			return d, fmt.Errorf("unclosed template parameter list")
		}
		ps, err := parseParams(rest[1:end])
		if err != nil {
			return d, fmt.Errorf("template parameters: %w", err)
		}
		d.Template = ps
		if d.Template == nil {
			d.Template = []CParam{}
		}
		s = strings.TrimSpace(rest[end+1:])
	}
	open := strings.IndexByte(s, '(')
	if open < 0 {
		return d, fmt.Errorf("no parameter list")
	}
	end := closing(s[open:], '(', ')')
	if end < 0 || strings.TrimSpace(s[open+end+1:]) != "" {
		return d, fmt.Errorf("the parameter list does not end the declaration")
	}
	head := strings.Fields(s[:open])
	if len(head) < 2 {
		return d, fmt.Errorf("no return type and name before (")
	}
	d.Name = head[len(head)-1]
	ps, err := parseParams(s[open+1 : open+end])
	if err != nil {
		return d, fmt.Errorf("parameters: %w", err)
	}
	d.Params = ps
	return d, nil
}

// closing is the index in s of the bracket closing s[0] (which is open),
// or -1.
func closing(s string, open, close byte) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case open:
			depth++
		case close:
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// parseParams splits a parameter list at its top-level commas into typed,
// named parameters with optional defaults.
func parseParams(s string) ([]CParam, error) {
	if strings.TrimSpace(s) == "" || strings.TrimSpace(s) == "void" {
		return nil, nil
	}
	var out []CParam
	for _, p := range splitTop(s, ',') {
		lhs, def, _ := strings.Cut(p, "=")
		f := strings.Fields(lhs)
		if len(f) < 2 {
			return nil, fmt.Errorf("parameter %q has no type and name", strings.TrimSpace(p))
		}
		out = append(out, CParam{Type: strings.Join(f[:len(f)-1], " "), Name: f[len(f)-1], Default: strings.TrimSpace(def)})
	}
	return out, nil
}

// splitTop splits s at sep outside parentheses and angle brackets.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '<':
			depth++
		case ')', '>':
			depth--
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// TemplateArgs splits a template argument list (SFPUSpec.InitTemplate or
// CallTemplate) into its arguments; "" is none.
func TemplateArgs(list string) []string {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	args := splitTop(list, ',')
	for i := range args {
		args[i] = strings.TrimSpace(args[i])
	}
	return args
}

// SFPUDeclared is every function the SFPU table declares, by name (an
// init shared by several ops is declared by one of them); the table is
// parsed once.
func SFPUDeclared() (map[string]CDecl, error) { return sfpuDeclared() }

var sfpuDeclared = sync.OnceValues(func() (map[string]CDecl, error) {
	out := map[string]CDecl{}
	for _, s := range SFPUTable {
		ds, err := ParseDecls(s.Decl)
		if err != nil {
			return nil, fmt.Errorf("SFPUTable %s: %w", s.Name, err)
		}
		for _, d := range ds {
			out[d.Name] = d
		}
	}
	return out, nil
})

// TemplateNote names the template arguments args of call fn for a
// printed comment ("approx=false, fast_and_approx=false"): each argument
// with its parameter's name from the SFPU table's declarations, or bare
// when the declaration is unknown. It returns "" for no arguments.
func TemplateNote(fn, args string) string {
	as := TemplateArgs(args)
	if len(as) == 0 {
		return ""
	}
	var params []CParam
	if decls, err := SFPUDeclared(); err == nil {
		params = decls[fn].Template
	}
	for i, a := range as {
		if i < len(params) {
			as[i] = params[i].Name + "=" + a
		}
	}
	return strings.Join(as, ", ")
}
