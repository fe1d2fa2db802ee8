package utils_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/b6192125/machinist/v1/utils"
)

type inner struct{ Tags []string }

type outer struct {
	Name    string
	Inner   *inner
	ByKey   map[string]*inner
	Any     interface{}
	Skipped []int `deepcopy:"-"`
	hidden  int
}

func TestDeepCopy(t *testing.T) {
	src := &outer{Name: "a", Inner: &inner{Tags: []string{"x"}}, ByKey: map[string]*inner{"k": {Tags: []string{"y"}}},
		Any: []int{1}, Skipped: []int{9}, hidden: 7}
	dst := &outer{}
	if err := utils.DeepCopy(dst, src); err != nil {
		t.Fatal(err)
	}
	if dst.Name != "a" || !reflect.DeepEqual(dst.Inner, src.Inner) || !reflect.DeepEqual(dst.ByKey, src.ByKey) || !reflect.DeepEqual(dst.Any, src.Any) {
		t.Fatalf("copy %+v of %+v", dst, src)
	}
	if dst.Skipped != nil || dst.hidden != 0 {
		t.Fatalf("copied a field tagged deepcopy:\"-\" or unexported: %+v", dst)
	}
	src.Inner.Tags[0], src.ByKey["k"].Tags[0], src.Any.([]int)[0] = "changed", "changed", 2
	if dst.Inner.Tags[0] != "x" || dst.ByKey["k"].Tags[0] != "y" || dst.Any.([]int)[0] != 1 {
		t.Fatalf("the copy shares memory with the source: %+v", dst)
	}
	if err := utils.DeepCopy(&inner{}, src); !errors.Is(err, utils.ErrNoMatchType) {
		t.Errorf("types that differ: %v", err)
	}
	if err := utils.DeepCopy(inner{}, inner{}); !errors.Is(err, utils.ErrNoPointer) {
		t.Errorf("not pointers: %v", err)
	}
	if err := utils.DeepCopy((*inner)(nil), (*inner)(nil)); !errors.Is(err, utils.ErrInvalidArgument) {
		t.Errorf("nil pointers: %v", err)
	}
	if c := utils.DeepClone(map[string][]int{"a": {1}}).(map[string][]int); c["a"][0] != 1 {
		t.Errorf("DeepClone: %v", c)
	}
}

func TestNames(t *testing.T) {
	if got, want := utils.GetLockName("report", "@every 1m"), "machinery_lock_"+filepath.Base(os.Args[0])+"report@every 1m"; got != want {
		t.Errorf("GetLockName: %q, want %q", got, want)
	}
	if u := utils.GetPureUUID(); len(u) != 32 {
		t.Errorf("GetPureUUID: %q, want 32 hex digits", u)
	}
}
