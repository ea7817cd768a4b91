package onebot

import (
	"encoding/json"
	"strconv"
	"strings"
)

// segment is one part of a OneBot v11 message: {"type": ..., "data": {...}}.
// Values in data may arrive as strings or numbers; they are kept as text.
type segment struct {
	Type string            `json:"type"`
	Data map[string]string `json:"data"`
}

func (s *segment) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type string                     `json:"type"`
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	s.Type, s.Data = raw.Type, map[string]string{}
	for k, v := range raw.Data {
		var str string
		if json.Unmarshal(v, &str) == nil {
			s.Data[k] = str
		} else {
			s.Data[k] = strings.Trim(string(v), `"`)
		}
	}
	return nil
}

// parseMessage reads an event's message in either form the
// specification allows: an array of segments, or a string with CQ codes.
func parseMessage(raw json.RawMessage) []segment {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return parseCQ(str)
	}
	var segs []segment
	if json.Unmarshal(raw, &segs) == nil {
		return segs
	}
	var one segment // some implementations send a lone segment
	if json.Unmarshal(raw, &one) == nil && one.Type != "" {
		return []segment{one}
	}
	return nil
}

// parseCQ splits a CQ-code string: plain text between [CQ:type,k=v,...]
// codes, with the escapes of the specification (&amp; &#91; &#93; and,
// inside codes, &#44;).
func parseCQ(s string) []segment {
	var out []segment
	for s != "" {
		i := strings.Index(s, "[CQ:")
		if i < 0 {
			out = append(out, textSegment(unescapeCQ(s)))
			break
		}
		if i > 0 {
			out = append(out, textSegment(unescapeCQ(s[:i])))
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			out = append(out, textSegment(unescapeCQ(s[i:])))
			break
		}
		parts := strings.Split(s[i+4:i+j], ",")
		seg := segment{Type: parts[0], Data: map[string]string{}}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			seg.Data[k] = unescapeCQ(v)
		}
		out = append(out, seg)
		s = s[i+j+1:]
	}
	return out
}

func textSegment(t string) segment { return segment{Type: "text", Data: map[string]string{"text": t}} }

var cqUnescaper = strings.NewReplacer("&#44;", ",", "&#91;", "[", "&#93;", "]", "&amp;", "&")

func unescapeCQ(s string) string { return cqUnescaper.Replace(s) }

// id is a OneBot id (user, group, message): a number in the
// specification, a string in some implementations.
type id string

func (i *id) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*i = id(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*i = id(n.String())
	return nil
}

// number returns the id as a JSON number when it is one (what the
// specification's actions take), else as a string.
func number(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	return s
}
