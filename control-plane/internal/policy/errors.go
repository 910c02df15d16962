package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a policy directory, printed as FILE:LINE:COL: field.path: reason.
type Error struct {
	Pos    Pos
	Field  string
	Reason string
	// Conflict says the document is valid alone and clashes with another: a duplicate name or
	// tenant, or an identity another tenant claims.
	Conflict bool
}

func (e Error) Error() string {
	return posString(e.Pos) + ": " + e.Field + ": " + e.Reason
}

// Warning prints a finding that leaves the set valid as compilers print one:
// FILE:LINE:COL: warning: field.path: reason.
func (e Error) Warning() string {
	return posString(e.Pos) + ": warning: " + e.Field + ": " + e.Reason
}

// Errors is every problem found in one load, in file and position order.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i].Pos, es[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return es
}

// collector gathers a load's errors and its warnings: findings that leave the set valid.
type collector struct{ errs, warns Errors }

func (c *collector) add(pos Pos, field, format string, args ...any) {
	c.errs = append(c.errs, Error{Pos: pos, Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (c *collector) conflict(pos Pos, field, format string, args ...any) {
	c.errs = append(c.errs, Error{Pos: pos, Field: field, Reason: fmt.Sprintf(format, args...), Conflict: true})
}

func (c *collector) warn(pos Pos, field, format string, args ...any) {
	c.warns = append(c.warns, Error{Pos: pos, Field: field, Reason: fmt.Sprintf(format, args...)})
}
