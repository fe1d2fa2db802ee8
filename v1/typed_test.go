package machinery_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A typed task whose parameter is of a type a task argument cannot have
// does not compile (testdata/typedmismatch).
func TestTypedTaskRefusesOtherArgTypes(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "build", "-o", t.TempDir()+"/out", "./testdata/typedmismatch").CombinedOutput()
	if err == nil {
		t.Fatal("a typed task with a struct parameter compiled")
	}
	if !strings.Contains(string(out), "does not satisfy machinery.Arg") {
		t.Fatalf("the build failed for another reason:\n%s", out)
	}
}
