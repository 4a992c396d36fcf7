package treecheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outsideCitations are the shapes a citation of a document outside the repository takes: a review's
// file or folder, or one of its findings or sections; the design; the summary of the original; a style
// guide; anything in the folder beside the checkout. Each is built from parts, so that this file does
// not match them itself.
var outsideCitations = []*regexp.Regexp{
	regexp.MustCompile(`review` + ` [a-z]+\.md`),
	regexp.MustCompile(`review` + `s/`),
	regexp.MustCompile(`DESIGN` + ` §`),
	regexp.MustCompile(`DESIGN` + `\.md`),
	regexp.MustCompile(`UPST` + `REAM\.md`),
	regexp.MustCompile(`\bUPST` + `REAM\b`),
	regexp.MustCompile(`STYLE` + `\.md`),
	regexp.MustCompile(`\.\./` + `shared/`),
	regexp.MustCompile(`\breview` + ` [A-Z][0-9]`),
	regexp.MustCompile(`[Rr]eview` + ` §`),
	regexp.MustCompile(`[Tt]he review` + `'s\b`),
	regexp.MustCompile(`\(review` + `\s*$`), // the rest of the citation on the next line
}

// citationHints are text that every shape of outsideCitations contains: a line with none of them
// is not matched against the shapes (a text scan instead of twelve regular expressions a line).
var citationHints = []string{"eview", "DESIGN", "UPST", "STYLE", "shared/"}

// docsCitation is a citation of a file under docs/, with the sections it names in quotes, which may
// continue on the next comment line: docs/<file>.md, "<section>", "<section>".
var (
	docsCitation = regexp.MustCompile("`?docs/([\\w-]+\\.md)`?((?:,(?:\\s|//|#)*\"[^\"\\n]+\")*)")
	quoted       = regexp.MustCompile(`"([^"\n]+)"`)
	whitespace   = regexp.MustCompile(`\s+`)
)

// checked tells whether the file at path rel (slash-separated, from the module root) is text the
// citation rules apply to.
func checked(rel string) bool {
	name := filepath.Base(rel)
	return name == "Makefile" || strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".md") ||
		strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// skipped are the folders not checked: recorded outputs, binaries, and git's own.
var skipped = map[string]bool{".git": true, "bin": true, "benchmarks/results": true}

// moduleRoot returns the folder of the go.mod above the working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the working directory")
		dir = parent
	}
}

// flatDocs reads the files under docs/ of a tree, each once, with every run of whitespace made one
// space (a section a citation names may wrap differently there).
type flatDocs struct {
	root  string
	files map[string]flatDoc
}

type flatDoc struct {
	text string
	err  error
}

func newFlatDocs(root string) *flatDocs {
	return &flatDocs{root: root, files: map[string]flatDoc{}}
}

// get returns docs/name, flattened.
func (d *flatDocs) get(name string) (string, error) {
	f, ok := d.files[name]
	if !ok {
		content, err := os.ReadFile(filepath.Join(d.root, "docs", name))
		f = flatDoc{text: whitespace.ReplaceAllString(string(content), " "), err: err}
		d.files[name] = f
	}
	return f.text, f.err
}

// citationProblems returns one line per problem of text, the content of the file at rel: every line
// that cites a document outside the repository, and every citation of docs/ whose file, or a section
// it names, is not in the tree of docs.
func citationProblems(docs *flatDocs, rel, text string) []string {
	var problems []string
	for i, line := range strings.Split(text, "\n") {
		if !slices.ContainsFunc(citationHints, func(h string) bool { return strings.Contains(line, h) }) {
			continue
		}
		for _, re := range outsideCitations {
			if re.MatchString(line) {
				problems = append(problems, fmt.Sprintf("%s:%d: cites a document outside the repository (%s): %s",
					rel, i+1, re, strings.TrimSpace(line)))
				break
			}
		}
	}
	for _, m := range docsCitation.FindAllStringSubmatchIndex(text, -1) {
		line := strings.Count(text[:m[0]], "\n") + 1
		doc := text[m[2]:m[3]]
		flat, err := docs.get(doc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: cites docs/%s, which is not in the tree", rel, line, doc))
			continue
		}
		for _, section := range quoted.FindAllStringSubmatch(text[m[4]:m[5]], -1) {
			if !strings.Contains(flat, whitespace.ReplaceAllString(section[1], " ")) {
				problems = append(problems, fmt.Sprintf("%s:%d: cites docs/%s, %q, which that file does not have",
					rel, line, doc, section[1]))
			}
		}
	}
	return problems
}

// walk calls visit with the path and the slash-separated path from root of every regular file under
// root, but in the folders skip names (by their path from root and their name).
func walk(root string, skip func(rel, name string) bool, visit func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && rel != "." && skip(rel, d.Name()):
			return filepath.SkipDir
		case !d.Type().IsRegular():
			return nil
		}
		return visit(path, rel)
	})
}

// TestNothingCitesDocumentsOutsideTheRepository: code, manifests and docs cite the files under docs/,
// which travel with the tree, and never design documents kept beside it.
func TestNothingCitesDocumentsOutsideTheRepository(t *testing.T) {
	root := moduleRoot(t)
	docs := newFlatDocs(root)
	files := 0
	err := walk(root, func(rel, _ string) bool { return skipped[rel] }, func(path, rel string) error {
		if !checked(rel) {
			return nil
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, p := range citationProblems(docs, rel, string(content)) {
			t.Error(p)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, files, 100, "the walk reached the tree")
}

func TestCitationProblemsFindEachShape(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "rules.md"), []byte("- **A rule\n  that wraps.** Text.\n"), 0o644))
	for _, cited := range []string{
		"// a rule (review" + " sharding.md L5).",
		"// the safety tests (review" + "s/sharding.md §1).",
		"// the protocol (DESIGN" + " §4).",
		"// xxhash, as in DESIGN" + ".md.",
		"# a config (UPST" + "REAM.md, \"Prober config\").",
		"// the rules are the original's (UPST" + "REAM \"Which clusters are probed\").",
		"the rules (`STYLE" + ".md`).",
		"(`../" + "shared/notes.md`)",
		"// keeps what it saw (review" + " N9).",
		"Review" + " §12 sketched both.",
		"as the review" + "'s Table 3 lists them",
		"// a rule (review" + "\n// sharding.md L5).",
		"(docs/" + "missing.md)",
		"(docs/" + "rules.md, \"A rule that wraps\", \"Another rule\")",
	} {
		assert.NotEmpty(t, citationProblems(newFlatDocs(root), "x.go", cited), "%s", cited)
	}
	for _, fine := range []string{
		"// (docs/" + "rules.md, \"A rule that wraps\")",
		"// (docs/" + "rules.md,\n// \"A rule\")",
		"// `docs/" + "rules.md`, \"that wraps\"",
		"// a TokenReview and a SubjectAccessReview; the reviews it sends",
	} {
		assert.Empty(t, citationProblems(newFlatDocs(root), "x.go", fine), "%s", fine)
	}
}
