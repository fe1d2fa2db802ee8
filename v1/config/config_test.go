package config

import (
	"errors"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestQueueArgsDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want map[string]interface{}
	}{
		{"image-type:png,x-match:any", map[string]interface{}{"image-type": "png", "x-match": "any"}},
		{"x-max-priority:10", map[string]interface{}{"x-max-priority": "10"}},
		{" a : 1 , b:2 ", map[string]interface{}{"a": "1", "b": "2"}},
		{"url:amqp://host", map[string]interface{}{"url": "amqp://host"}},
		{"empty:", map[string]interface{}{"empty": ""}},
		{"", map[string]interface{}{}},
	}
	for _, tt := range tests {
		var b QueueBindingArgs
		if err := b.Decode(tt.in); err != nil || !reflect.DeepEqual(map[string]interface{}(b), tt.want) {
			t.Errorf("QueueBindingArgs.Decode(%q) = %v, %v; want %v", tt.in, b, err, tt.want)
		}
		var d QueueDeclareArgs
		if err := d.Decode(tt.in); err != nil || !reflect.DeepEqual(map[string]interface{}(d), tt.want) {
			t.Errorf("QueueDeclareArgs.Decode(%q) = %v, %v; want %v", tt.in, d, err, tt.want)
		}
	}

	for _, in := range []string{"novalue", "a:1,,b:2", ":value", "a:1,b"} {
		b := QueueBindingArgs{"kept": "yes"}
		err := b.Decode(in)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "QueueBindingArgs") {
			t.Errorf("QueueBindingArgs.Decode(%q) = %v, want ErrInvalid naming the type", in, err)
		}
		if !reflect.DeepEqual(b, QueueBindingArgs{"kept": "yes"}) {
			t.Errorf("QueueBindingArgs.Decode(%q) changed the map on error: %v", in, b)
		}
		d := QueueDeclareArgs{}
		if err := d.Decode(in); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "QueueDeclareArgs") {
			t.Errorf("QueueDeclareArgs.Decode(%q) = %v, want ErrInvalid naming the type", in, err)
		}
	}
}

// The package documentation lists the environment variables; every name
// the struct tags define must be there.
func TestPackageDocListsEveryEnvName(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, n := range envNames(t) {
		if !regexp.MustCompile(`\b` + n.plain + `\b`).MatchString(doc) {
			t.Errorf("the package documentation does not list %s", n.plain)
		}
	}
}
