// Package utils holds machinery's helpers that programs written against
// machinery v1 import: lock names of periodic tasks, UUIDs without
// dashes, and a deep copy by reflection.
package utils

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/google/uuid"
)

// LockKeyPrefix starts the lock names GetLockName makes.
const LockKeyPrefix = "machinery_lock_"

// GetLockName returns machinery's name of the lock of the periodic task
// name with cron spec: the prefix, the program's base name, name and spec.
// machinist's periodic tasks use claims of their own, not these locks.
func GetLockName(name, spec string) string {
	return LockKeyPrefix + filepath.Base(os.Args[0]) + name + spec
}

// GetPureUUID returns a random UUID as 32 hexadecimal digits, without
// dashes.
func GetPureUUID() string {
	return strings.ReplaceAll(uuid.NewString(), "-", "")
}

// The errors of DeepCopy.
var (
	ErrNoMatchType     = errors.New("no match type")
	ErrNoPointer       = errors.New("must be interface")
	ErrInvalidArgument = errors.New("invalid arguments")
)

// DeepCopy copies what src points to into what dst points to, following
// pointers, maps, slices and interfaces so that dst shares nothing with
// src. dst and src must be pointers of one type (else ErrNoMatchType or
// ErrNoPointer), neither nil (ErrInvalidArgument). Unexported struct
// fields, and fields tagged `deepcopy:"-"`, are left as dst has them.
func DeepCopy(dst, src interface{}) error {
	td, ts := reflect.TypeOf(dst), reflect.TypeOf(src)
	if td != ts {
		return ErrNoMatchType
	}
	if ts.Kind() != reflect.Ptr {
		return ErrNoPointer
	}
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	if !d.IsValid() || !s.IsValid() {
		return ErrInvalidArgument
	}
	copyValue(d, s)
	return nil
}

// DeepClone returns a deep copy of v (see DeepCopy).
func DeepClone(v interface{}) interface{} {
	if v == nil {
		return nil
	}
	out := reflect.New(reflect.TypeOf(v)).Elem()
	copyValue(out, reflect.ValueOf(v))
	return out.Interface()
}

// copyValue sets dst, which is settable, to a deep copy of src.
func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		copyValue(v, src.Elem())
		dst.Set(v)
	case reflect.Ptr:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Elem().Type())
		copyValue(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		iter := src.MapRange()
		for iter.Next() {
			v := reflect.New(iter.Value().Type()).Elem()
			copyValue(v, iter.Value())
			m.SetMapIndex(iter.Key(), v)
		}
		dst.Set(m)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Cap())
		for i := range src.Len() {
			copyValue(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Struct:
		t := src.Type()
		for i := range src.NumField() {
			if f := dst.Field(i); f.CanSet() && t.Field(i).Tag.Get("deepcopy") != "-" {
				copyValue(f, src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}
