/* html_assets.h - the HTML report's page template, style and script, compiled in from
 * reports/assets/ by tools/embed.py (one string per line). Used only by html.c. */
#ifndef SHARDLENS_HTML_ASSETS_H
#define SHARDLENS_HTML_ASSETS_H

extern const char *const report_asset_page[]; /* report.html: @STYLE@, @SCRIPT@, @DATA@ lines */
extern const unsigned report_asset_page_n;
extern const char *const report_asset_style[]; /* report.css */
extern const unsigned report_asset_style_n;
extern const char *const report_asset_script[]; /* report.js */
extern const unsigned report_asset_script_n;

#endif
