#!/usr/bin/env bash
# Writes .dvc/plots_page.html: the page `dvc plots show` fills (.dvc/config, plots.html_template),
# with Vega, Vega-Lite and Vega-Embed inlined, so the charts render with no network. DVC's own page
# loads them from a CDN and is blank offline. The versions are the ones dvc-render 1.0.2 loads
# (dvc_render/vega.py); npm fetches them once, when this script runs.
#
#   scripts/offline_plots_page.sh        (needs npm and the npm registry; the page is committed)
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(vega@5.20.2 vega-lite@5.2.0 vega-embed@6.18.2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "${packages[@]}" >/dev/null && for tarball in *.tgz; do
  mkdir "${tarball%.tgz}" && tar xzf "$tarball" -C "${tarball%.tgz}"; done)
page=.dvc/plots_page.html
{
  echo '<!DOCTYPE html>'
  echo '<html>'
  echo '<head>'
  echo '    {refresh_tag}'
  echo '    <title>DVC Plot</title>'
  echo "    <!-- ${packages[*]}, inlined by scripts/offline_plots_page.sh from npm."
  echo '         Vega, Vega-Lite and Vega-Embed: Copyright (c) University of Washington Interactive Data Lab,'
  echo '         BSD-3-Clause (each package'"'"'s LICENSE). -->'
  for name in vega-5.20.2/package/build/vega.min.js vega-lite-5.2.0/package/build/vega-lite.min.js \
              vega-embed-6.18.2/package/build/vega-embed.min.js; do
    printf '    <script>'
    cat "$work/$name"
    echo '</script>'
  done
  echo '    <style>'
  echo '        table {'
  echo '            border-spacing: 15px;'
  echo '        }'
  echo '    </style>'
  echo '</head>'
  echo '<body>'
  echo '    {plot_divs}'
  echo '</body>'
  echo '</html>'
} > "$page"
echo "wrote $page ($(wc -c < "$page") bytes)"
