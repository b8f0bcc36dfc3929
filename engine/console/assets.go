package console

import (
	"embed"
	"mime"
	"net/http"
	"path"
)

// The page and its files, embedded in the binary: the console needs no network beyond the
// engine (no CDN, no framework), and each binary serves the console of its own version.
//
//go:embed assets
var assets embed.FS

// serveIndex serves the page for every view's URL; its script shows the view.
func serveIndex(w http.ResponseWriter, _ *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b)
}

// serveAsset serves /console/assets/{file}.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := assets.ReadFile("assets/" + name)
	if err != nil || name == "index.html" {
		fail(w, http.StatusNotFound, "no console file "+name)
		return
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if path.Ext(name) == ".js" {
		ctype = "text/javascript; charset=utf-8" // modules must be JavaScript whatever the system's MIME table says
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(b)
}
