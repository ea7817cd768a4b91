package onebot

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseCQ(t *testing.T) {
	got := parseCQ("hi &#91;x&#93; [CQ:at,qq=10001] look[CQ:image,file=a.png,url=http://h/a?x=1&#44;2&amp;y=3]&amp;")
	want := []segment{
		textSegment("hi [x] "),
		{Type: "at", Data: map[string]string{"qq": "10001"}},
		textSegment(" look"),
		{Type: "image", Data: map[string]string{"file": "a.png", "url": "http://h/a?x=1,2&y=3"}},
		textSegment("&"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseCQ:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseMessageArrayWithNumbers(t *testing.T) {
	segs := parseMessage(json.RawMessage(`[{"type":"at","data":{"qq":10001}},{"type":"text","data":{"text":" hi"}}]`))
	if len(segs) != 2 || segs[0].Data["qq"] != "10001" || segs[1].Data["text"] != " hi" {
		t.Fatalf("%+v", segs)
	}
}
