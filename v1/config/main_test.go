package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a reloader
// that StopReloading did not end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeFile writes content to path atomically, as the documentation of
// NewFromYaml asks: a reloader never sees it half written.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// tempFile writes content to a new file in a test directory and returns its
// path.
func tempFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yml")
	writeFile(t, path, content)
	return path
}

// envName is an environment variable a Config reads.
type envName struct {
	plain  string // the documented name, e.g. REDIS_MAX_IDLE
	nested string // the name envconfig tries first for a nested field, e.g. REDIS_REDIS_MAX_IDLE; "" at the top level
}

// envNames lists, from the struct tags, every environment variable a Config
// reads.
func envNames(t *testing.T) []envName {
	t.Helper()
	var names []envName
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		tag := f.Tag.Get("envconfig")
		if !f.IsExported() || f.Tag.Get("ignored") == "true" {
			continue
		}
		if tag == "" {
			t.Fatalf("Config.%s has no envconfig tag", f.Name)
		}
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			st := f.Type.Elem()
			for j := range st.NumField() {
				inner := st.Field(j).Tag.Get("envconfig")
				if inner == "" {
					t.Fatalf("%s.%s has no envconfig tag", st.Name(), st.Field(j).Name)
				}
				names = append(names, envName{plain: inner, nested: tag + "_" + inner})
			}
			continue
		}
		names = append(names, envName{plain: tag})
	}
	return names
}

// clearEnv unsets, for the duration of the test, every variable a Config
// reads, so that the environment the tests run in does not leak into them.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, n := range envNames(t) {
		for _, k := range []string{n.plain, n.nested} {
			if _, ok := os.LookupEnv(k); ok && k != "" {
				t.Setenv(k, "") // restores the value at Cleanup
				os.Unsetenv(k)
			}
		}
	}
}

// checkAllSet fails if a field of v (a struct, or a pointer to one), or of
// the structs it points to, is zero; the fields named in skip excepted. It
// keeps the "every field" tests honest when a field is added.
func checkAllSet(t *testing.T, v reflect.Value, path string, skip map[string]bool) {
	t.Helper()
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name := path + f.Name
		if !f.IsExported() || skip[name] {
			continue
		}
		fv := v.Field(i)
		if fv.IsZero() {
			t.Errorf("%s is zero: set it in this test's data", name)
			continue
		}
		if fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct && fv.Type().Elem().PkgPath() == v.Type().PkgPath() {
			checkAllSet(t, fv, name+".", skip)
		}
	}
}
