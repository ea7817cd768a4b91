package plugin

import (
	"fmt"
	"strings"
)

// ContentPart is one part of a MULTIMODAL_AGENT result, shaped as a content
// part of an OpenAI chat message: {"type":"text","text":...} or
// {"type":"image_url","image_url":{"url":...}}.
type ContentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

// imageURL is the image of an image_url content part: an http(s) URL or a
// data: URL such as "data:image/png;base64,...". (Unexported to keep the
// SDK's face small; its fields are reachable as part.ImageURL.URL.)
type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// TextPart returns a text content part.
func TextPart(text string) ContentPart { return ContentPart{Type: "text", Text: text} }

// ImagePart returns an image content part for an http(s) or data: URL.
func ImagePart(url string) ContentPart {
	return ContentPart{Type: "image_url", ImageURL: &imageURL{URL: url}}
}

func (c ContentPart) validate() error {
	switch c.Type {
	case "text":
		if c.ImageURL != nil {
			return fmt.Errorf("a text part carries no image_url")
		}
	case "image_url":
		if c.ImageURL == nil || c.ImageURL.URL == "" {
			return fmt.Errorf("an image_url part needs image_url.url")
		}
		u := c.ImageURL.URL
		if !strings.HasPrefix(u, "data:image/") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return fmt.Errorf("image url must be http(s) or data:image/..., got %.40q", u)
		}
	default:
		return fmt.Errorf("type must be \"text\" or \"image_url\", got %q", c.Type)
	}
	return nil
}
