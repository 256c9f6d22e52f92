package httpapi_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// TestProblemCodesMatchSpec: the codes api/openapi.yaml lists for
// Problem (its table, by status, and the kinds' default codes) are
// exactly the codes kerneld may answer, errdefs.Answered.
func TestProblemCodesMatchSpec(t *testing.T) {
	loader, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	desc := loader.doc.Components.Schemas["Problem"].Value.Description
	var spec []string
	for _, m := range regexp.MustCompile("(?m)^\\| \\d{3} \\| `([a-z_]+)` \\|").FindAllStringSubmatch(desc, -1) {
		spec = append(spec, m[1])
	}
	for _, m := range regexp.MustCompile("`([a-z_]+)` \\(\\d{3}\\)").FindAllStringSubmatch(desc, -1) {
		spec = append(spec, m[1])
	}
	slices.Sort(spec)
	var answered []string
	for _, c := range errdefs.Answered {
		answered = append(answered, string(c))
	}
	for _, c := range answered {
		if !slices.Contains(spec, c) {
			t.Errorf("errdefs answers code %s, which the Problem schema of api/openapi.yaml does not list", c)
		}
	}
	for i, c := range spec {
		if !slices.Contains(answered, c) {
			t.Errorf("api/openapi.yaml lists code %s, which is not in errdefs.Answered", c)
		}
		if i > 0 && spec[i-1] == c {
			t.Errorf("api/openapi.yaml lists code %s twice", c)
		}
	}
}
