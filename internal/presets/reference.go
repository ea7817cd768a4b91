package presets

import (
	"encoding/json"
	"strings"
)

// Reference is a preset in the reference's format (its presets API and
// preset market): tags as one comma-separated string, the avatar as a
// base64 data URL, an author and extension data. Import and export use
// it, so a persona moves between the reference and nekro as a JSON file.
type Reference struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Avatar      string `json:"avatar"`
	Content     string `json:"content"`
	Description string `json:"description"`
	Tags        string `json:"tags"`
	Author      string `json:"author"`
	ExtData     string `json:"ext_data"`
}

// Export returns p in the reference's format. The language, which the
// reference does not have, travels in ext_data.
func Export(p Preset) Reference {
	title := p.Title
	if title == "" {
		title = p.Name
	}
	ext, _ := json.Marshal(map[string]string{"nekro_lang": p.Lang})
	return Reference{Name: p.Name, Title: title, Avatar: p.Avatar, Content: p.Content, Description: p.Description,
		Tags: strings.Join(p.Tags, ","), Author: p.Author, ExtData: string(ext)}
}

// Import returns r as a preset to create (no id); its language is read
// back from ext_data when an export of nekro put it there, else English.
func Import(r Reference) Preset {
	p := Preset{Name: r.Name, Title: r.Title, Avatar: r.Avatar, Content: r.Content, Description: r.Description,
		Tags: splitTags(r.Tags), Author: r.Author, Lang: "en"}
	var ext struct {
		Lang string `json:"nekro_lang"`
	}
	if json.Unmarshal([]byte(r.ExtData), &ext) == nil && ext.Lang != "" {
		p.Lang = ext.Lang
	}
	if p.Title == p.Name {
		p.Title = ""
	}
	return p
}
