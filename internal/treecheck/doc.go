// Package treecheck checks the repository's own text. Its test walks the tree from the module root and
// fails, with file and line, on every Go, Markdown, YAML and Makefile line that cites a design
// document kept outside the repository (a review, a design or a summary of the original beside the
// checkout): code, manifests and docs cite the files under docs/ instead, and a citation of the form
// docs/<file>.md, "<section>" must name a file and a section that exist. The recorded outputs under
// benchmarks/results, bin/ and .git are not checked.
package treecheck
