package httpapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/kerneld/kerneld/api"
)

// TestListParamsMatchOpenAPI checks that every list route takes the query
// parameters api/openapi.yaml declares for it, and no other; the
// metadata.KEY filters, which OpenAPI cannot declare, are described in
// words.
func TestListParamsMatchOpenAPI(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	for route, allowed := range listParams {
		method, path, _ := strings.Cut(route, " ")
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s: not in api/openapi.yaml", route)
			continue
		}
		var declared []string
		for _, p := range append(item.Parameters, item.GetOperation(method).Parameters...) {
			if p.Value.In == openapi3.ParameterInQuery {
				declared = append(declared, p.Value.Name)
			}
		}
		var want []string
		for _, a := range allowed {
			if strings.HasSuffix(a, ".") {
				if !strings.Contains(item.GetOperation(method).Description, "`"+a+"KEY") {
					t.Errorf("%s: the description does not describe %sKEY", route, a)
				}
				continue
			}
			want = append(want, a)
		}
		slices.Sort(declared)
		slices.Sort(want)
		if !slices.Equal(declared, want) {
			t.Errorf("%s: api/openapi.yaml declares %v, the route takes %v", route, declared, want)
		}
	}
}
