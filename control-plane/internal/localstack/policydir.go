package localstack

import (
	"os"
	"path/filepath"
)

// CopyPolicies copies the files of src (not its subdirectories, such as policies/schema) into
// dst, creating it: a stack of tests or of the soak gets a policy directory of its own to write.
func CopyPolicies(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
