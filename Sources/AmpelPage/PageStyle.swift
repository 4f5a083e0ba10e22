/// The page's style sheet, embedded: the page loads nothing from outside (no fonts, no CDN).
///
/// Light and dark follow `prefers-color-scheme`; the system font stack stands in for a web font.
enum PageStyle {
    static let css = #"""
:root{color-scheme:light dark;--bg:#f3f5f7;--card:#fff;--text:#1d2329;--muted:#5f6b76;--line:#dde3e8;--accent:#0b63c4;
--stroke:#ffffff;--hover:#1d2329;--row:#f7f9fa;--hatch:rgba(20,24,28,.45);--shadow:0 1px 2px rgba(16,24,32,.06),0 4px 16px rgba(16,24,32,.05);
--warn-bg:#fff4d6;--warn-text:#6b4a00;--warn-line:#f0c75e;--ok:#00a651;--bad:#e3000f;
--ok-bg:#e4f6eb;--ok-text:#05632f;--ok-line:#8fd4a9;--fixed-bg:#e8f1fc;--fixed-text:#0b4f9c;--fixed-line:#9cc3ee}
@media (prefers-color-scheme:dark){:root{--bg:#0f1317;--card:#171c21;--text:#e6eaee;--muted:#98a4ae;--line:#2a3239;--accent:#6cb2ff;
--stroke:#0f1317;--hover:#ffffff;--row:#1c2228;--hatch:rgba(0,0,0,.55);--shadow:0 1px 2px rgba(0,0,0,.4);
--warn-bg:#3a2e0c;--warn-text:#ffe3a1;--warn-line:#7a5d12;
--ok-bg:#0f2f1d;--ok-text:#9be6b6;--ok-line:#1f6b3d;--fixed-bg:#132638;--fixed-text:#a9d0ff;--fixed-line:#2d5b8a}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--text);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;flex-wrap:wrap;gap:12px 24px;align-items:center;justify-content:space-between;padding:16px 24px;background:var(--card);border-bottom:1px solid var(--line)}
.brand{display:flex;gap:12px;align-items:center}.brand h1{font-size:20px;margin:0;letter-spacing:.2px}.brand p{margin:0;color:var(--muted);font-size:13px}
.logo{display:inline-flex;flex-direction:column;gap:3px;padding:5px;border-radius:8px;background:#20262c}
.logo i{display:block;width:10px;height:10px;border-radius:50%}
.meta{display:flex;flex-wrap:wrap;gap:8px;align-items:center}
.pill{display:inline-flex;align-items:center;gap:6px;padding:3px 10px;border-radius:999px;border:1px solid var(--line);font-size:13px;color:var(--muted);white-space:nowrap}
.pill b{color:var(--text);font-weight:600}
/* The data badge: green only for live data that is not stale, amber for stale live data and a
   stand-in, blue for data chosen to stay as it is (a snapshot, the history, a replay). */
.pill.data{font-weight:600}
.pill.data.ok{background:var(--ok-bg);color:var(--ok-text);border-color:var(--ok-line)}
.pill.data.warn{background:var(--warn-bg);color:var(--warn-text);border-color:var(--warn-line)}
.pill.data.fixed{background:var(--fixed-bg);color:var(--fixed-text);border-color:var(--fixed-line)}
/* The page's connection: grey while polls are answered (no green next to the data badge), red when not. */
.pill.conn::before{content:"";width:8px;height:8px;border-radius:50%;background:var(--muted)}
.pill.conn.down{color:var(--bad)}.pill.conn.down::before{background:var(--bad)}
.lang{font-size:13px;padding:3px 10px;border:1px solid var(--line);border-radius:999px}
.banner{margin:16px 24px 0;padding:10px 14px;border-radius:10px;background:var(--warn-bg);color:var(--warn-text);border:1px solid var(--warn-line);font-weight:600;overflow-wrap:anywhere}
.banner p{margin:0}.banner p+p{margin-top:4px}
main.layout{display:grid;grid-template-columns:minmax(0,1.25fr) minmax(0,1fr);gap:16px;padding:16px 24px 8px;max-width:1500px;margin:0 auto}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;box-shadow:var(--shadow);padding:14px 16px;min-width:0}
.card.wide{grid-column:1/-1}
.card h2{font-size:16px;margin:0 0 10px}.card h3{font-size:14px;margin:14px 0 6px;color:var(--muted)}
.card-head{display:flex;gap:12px;align-items:center;justify-content:space-between;flex-wrap:wrap;margin-bottom:10px}.card-head h2{margin:0}
input[type=search]{font:inherit;padding:6px 10px;border-radius:8px;border:1px solid var(--line);background:var(--bg);color:var(--text);min-width:0;width:220px;max-width:100%}
svg.map{display:block;width:100%;height:auto;max-height:72vh}
svg.map .district{stroke:var(--stroke);stroke-width:1.1;stroke-linejoin:round;cursor:pointer;transition:fill .4s}
svg.map .district:hover{stroke:var(--hover);stroke-width:2.2}
svg.map .stale-hatch{display:none;pointer-events:none}svg.map.stale .stale-hatch{display:inline}
.hatch-stroke{fill:var(--hatch)}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;list-style:none;padding:0;margin:10px 0 0;font-size:13px;color:var(--muted)}
.legend li{display:flex;align-items:center;gap:6px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:3px;flex:none;border:1px solid rgba(127,127,127,.35)}
.swatch.hatched{background:repeating-linear-gradient(45deg,var(--hatch) 0 3px,transparent 3px 7px)}
.tooltip{position:fixed;z-index:10;pointer-events:none;background:var(--card);color:var(--text);border:1px solid var(--line);box-shadow:var(--shadow);border-radius:8px;padding:8px 10px;font-size:13px;max-width:260px}
.tooltip b{display:block;font-size:14px;margin-bottom:2px}
.scroll{max-height:640px;overflow:auto;border-radius:8px}
table{width:100%;border-collapse:collapse;font-size:14px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
td.wrap{white-space:normal}
th{position:sticky;top:0;background:var(--card);color:var(--muted);font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.4px}
th[data-sort]{cursor:pointer;user-select:none}th[data-sort]::after{content:" ↕";opacity:.35}
th[aria-sort=ascending]::after{content:" ↑";opacity:1}th[aria-sort=descending]::after{content:" ↓";opacity:1}
tbody tr:hover{background:var(--row)}
.num{text-align:right;font-variant-numeric:tabular-nums}
.dot{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:6px;vertical-align:-1px;border:1px solid rgba(127,127,127,.35)}
.key{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px;overflow:hidden;text-overflow:ellipsis;max-width:280px}
.pager{display:flex;gap:8px;align-items:center;justify-content:flex-end;margin-top:10px;color:var(--muted);font-size:13px}
button{font:inherit;font-size:13px;padding:4px 12px;border-radius:8px;border:1px solid var(--line);background:var(--bg);color:var(--text);cursor:pointer}
button:disabled{opacity:.45;cursor:default}
.empty{color:var(--muted);text-align:center;padding:14px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:0;font-size:14px}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere}
.counters{display:flex;flex-wrap:wrap;gap:6px}.counters span{font-size:12px;padding:2px 8px;border-radius:6px;background:var(--row);border:1px solid var(--line)}
ol.errors{margin:0;padding-left:20px;font-size:13px;max-height:240px;overflow:auto}ol.errors li{margin:2px 0;overflow-wrap:anywhere}
ol.errors time{color:var(--muted);margin-right:6px;font-variant-numeric:tabular-nums}
.state-on{color:var(--ok);font-weight:600}.state-off{color:var(--bad);font-weight:600}
footer{color:var(--muted);font-size:12px;padding:12px 24px 24px;max-width:1500px;margin:0 auto}
.district-page{max-width:980px;margin:0 auto;padding:16px 24px;display:grid;gap:16px}
.phase-head{display:flex;gap:14px;align-items:center}.phase-head .big{width:44px;height:44px;border-radius:12px;flex:none}
.phase-head h2{margin:0;font-size:20px}.phase-head p{margin:2px 0 0;color:var(--muted)}
ul.rules{margin:6px 0 0;padding-left:20px}ul.rules li{margin:4px 0}
svg.chart{display:block;width:100%;height:auto}
svg.chart .band{fill-opacity:.22}svg.chart .grid line{stroke:var(--line);stroke-width:1}
svg.chart text{fill:var(--muted);font-size:12px}svg.chart .series{fill:none;stroke:var(--text);stroke-width:1.6;stroke-linejoin:round}
svg.chart .data-day line{stroke:var(--accent);stroke-width:2;stroke-dasharray:6 4}svg.chart .data-day text{fill:var(--accent);font-weight:600}
svg.chart .data-day circle{fill:var(--accent);stroke:var(--card);stroke-width:2}
svg.chart .hover rect:hover{fill:var(--text);fill-opacity:.12}
.note{color:var(--muted);font-size:13px;margin:8px 0 0}
.chip{display:inline-block;width:.8em;height:.8em;border-radius:50%;vertical-align:middle;border:1px solid var(--line)}
.spark{vertical-align:middle;color:var(--muted)}#state-table td.num{white-space:nowrap}
@media (max-width:900px){main.layout{grid-template-columns:1fr;padding:12px}header.top{padding:12px}.banner{margin:12px 12px 0}
.scroll{max-height:420px}input[type=search]{width:100%}.list-card td:first-child{white-space:normal}th,td{padding:6px 5px}.hide-narrow{display:none}.district-page{padding:12px}}
/* A phone: no table may scroll sideways. Headings wrap at spaces, keys, districts and what a
   lamp follows anywhere, the driver column goes; phase and last fix stay whole. */
@media (max-width:600px){main.layout{padding:8px;gap:10px}.card{padding:12px 10px}.district-page{padding:8px}
th,td{white-space:normal;padding:5px 4px}th{letter-spacing:0}td.key,td.wrap{overflow-wrap:anywhere}.key{max-width:none}
td.phase,td.fix{white-space:nowrap}.hide-phone{display:none}}
"""#
}
