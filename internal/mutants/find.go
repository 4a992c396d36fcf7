package mutants

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ListName is the name of a package's list of mutants, in its testdata directory.
const ListName = "mutants.yaml"

// Find returns the lists of mutants under root: every <package>/testdata/mutants.yaml outside
// hidden directories, bin/ and other testdata directories.
func Find(root string) ([]string, error) {
	var lists []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == root {
			return err
		}
		switch name := d.Name(); {
		case strings.HasPrefix(name, "."), name == "bin" && filepath.Dir(path) == root:
			return filepath.SkipDir
		case name == "testdata":
			list := filepath.Join(path, ListName)
			if _, err := os.Stat(list); err == nil {
				lists = append(lists, list)
			}
			return filepath.SkipDir
		}
		return nil
	})
	return lists, err
}
