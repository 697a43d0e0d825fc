package scalesection

import (
	"strings"
	"testing"
)

func TestPutAndCarry(t *testing.T) {
	doc := "# Benchmarks\n\nbody\n"
	d1 := Put(doc, "intro", "A, 2 cores", "table A1")
	if !strings.HasPrefix(d1, doc) || !strings.Contains(d1, Heading) || !strings.Contains(d1, "table A1") {
		t.Fatalf("first put:\n%s", d1)
	}
	d2 := Put(d1, "intro", "B, 16 cores", "table B")
	d3 := Put(d2, "intro", "A, 2 cores", "table A2")
	if strings.Contains(d3, "table A1") || !strings.Contains(d3, "table A2") || !strings.Contains(d3, "table B") {
		t.Fatalf("replace:\n%s", d3)
	}
	if strings.Count(d3, Heading) != 1 || strings.Count(d3, Begin) != 1 || strings.Count(d3, End) != 1 {
		t.Fatalf("region duplicated:\n%s", d3)
	}
	if strings.Index(d3, "table A2") > strings.Index(d3, "table B") {
		t.Errorf("A's block moved after B's:\n%s", d3)
	}
	// make bench rewrites the file: the region comes along, once.
	fresh := "# Benchmarks\n\nnew body\n"
	c := Carry(d3, fresh)
	if !strings.HasPrefix(c, fresh) || !strings.Contains(c, "table A2") || !strings.Contains(c, "table B") {
		t.Fatalf("carry:\n%s", c)
	}
	if Carry(d3, c) != c {
		t.Error("carry into a report that has the region changed it")
	}
	if Carry("no region", fresh) != fresh {
		t.Error("carry without a region changed the report")
	}
	bs := Blocks(d3)
	if len(bs) != 2 || bs[0].Key != "A, 2 cores" || bs[0].Body != "table A2\n" || bs[1].Key != "B, 16 cores" {
		t.Errorf("blocks = %q", bs)
	}
	if Blocks("nothing") != nil {
		t.Error("blocks of a doc without a region")
	}
}
