// Package nekro is the entry point of a nekro binary. The standard binary
// is cmd/nekro; a binary with your own plugins is five lines:
//
//	package main
//
//	import (
//		"github.com/nekro-go/nekro"
//		_ "github.com/nekro-go/nekro/plugins/all"
//		_ "example.com/you/yourplugin"
//	)
//
//	func main() { nekro.Main() }
package nekro

import "github.com/nekro-go/nekro/internal/cli"

// Main runs the nekro command line with the plugins compiled in.
func Main() { cli.Main() }
