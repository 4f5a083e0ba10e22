/// The page's script, embedded: it polls the JSON API and updates the map, the district
/// list, the devices, the lamps and the bridge in place (DESIGN 62: a poll, not SSE).
///
/// Every value from the API goes into the page through `textContent` or an attribute, never
/// as markup: device keys and error texts come from outside.
enum PageScript {
    /// How the script writes any value from the API as text (``values`` holds it on its own,
    /// so a test can run it without the page).
    static let values = #"""
/* A value from the API as text: an object by its fields, sorted ("delivered 3 · dropped (gaveUp 0 · queueFull 1)"),
   a list by its items, null as "–"; never String() of an object, which reads "[object Object]". */
function isObj(v){return v!==null&&typeof v==="object"&&!Array.isArray(v);}
function show(v){if(v==null||v==="")return "–";
 if(Array.isArray(v))return v.length?v.map(show).join(", "):"–";
 if(isObj(v)){const keys=Object.keys(v).sort();if(!keys.length)return "–";
  return keys.map(k=>k+(isObj(v[k])?" ("+show(v[k])+")":" "+show(v[k]))).join(" · ");}
 return String(v);}
/* bridge/info's counters as chips: "alerts 3"; a table's entries as "accepted.owntracks 12"; an
   entry that is an object itself (a webhook's deliveries) by its fields after a colon. */
function counterTexts(c){const out=[];
 for(const k of Object.keys(isObj(c)?c:{}).sort()){const v=c[k];
  if(isObj(v))for(const r of Object.keys(v).sort())out.push(k+"."+r+(isObj(v[r])?": ":" ")+show(v[r]));
  else out.push(k+" "+show(v));}
 return out;}
"""#

    /// The data badge and the lines under the header, built from `bridge/info` as
    /// ``PageText/badge(_:)`` and ``PageText/notices(_:)`` build them on the server, from the
    /// same words and templates (`cfg.dataText`, ``PageText``'s `dataStrings`); on its own so a
    /// test can run both sides on the same input.
    static let dataStatus = #"""
/* The data in force from bridge/info's dataKind, dataDate, source, stale, lastError and held,
   in the words of D (the page's dataText). */
function has(o,k){return o!=null&&Object.prototype.hasOwnProperty.call(o,k);}
/* {name} replaced in one pass: a value holding "{day}" (an error text) stays as it is. */
function fill(t,v){return t.replace(/\{(\w+)\}/g,(m,k)=>has(v,k)?v[k]:m);}
/* A bridge/info without dataKind (an older daemon): the kind its source's name says. */
function kindOf(i,D){const k=i&&i.dataKind;if(has(D.kinds,k))return k;const s=String((i&&i.source)||"");
 return s==="replay"?"replay":s.startsWith("history")?"history":s.startsWith("snapshot")||s.startsWith("bundled")?"snapshot":"live";}
/* 2020-11-23 in English, 23.11.2020 in German. */
function dayText(iso,D){if(iso==null)return "–";const d=String(iso);if(!/^\d{4}-\d{2}-\d{2}$/.test(d))return d;
 return D.lang==="de"?d.slice(8)+"."+d.slice(5,7)+"."+d.slice(0,4):d;}
/* A stand-in's source is the bundled snapshot's; the live sources are the RKI's. */
function sourceName(i,k,D){const s=String((i&&i.source)||"");if(has(D.sources,s))return D.sources[s];
 if(k==="live"||k==="stand-in")return D.sources.rki;return s||"–";}
/* "Snapshot · 2020-11-05"; green only for live data that is not stale. */
function dataBadge(i,D){const k=kindOf(i,D),live=k==="live",stale=!!(i&&i.stale);
 return {text:D.kinds[k]+" · "+dayText(i&&i.dataDate,D)+(live&&stale?" ("+D.stale+")":""),
  tone:live&&!stale?"ok":live||k==="stand-in"?"warn":"fixed",title:D.titles[k]};}
/* Why the source failed, else why the data is stale; a held publication on its own line. */
function dataNotices(i,D){i=i||{};const k=kindOf(i,D),out=[];
 /* lastError is the journal's while it fails: said in the bridge card, not as the data's. */
 const dataError=i.lastError&&i.lastError!==i.journalError?i.lastError:null;
 const v={source:sourceName(i,k,D),data:D.data[k],day:dayText(i.dataDate,D),error:dataError?show(dataError):"",held:i.held?show(i.held):""};
 if(dataError)out.push({id:"data-error",text:fill(D.unreachableReasons.some(p=>v.error.startsWith(p))?D.unreachable:D.failed,v)});
 else if(i.stale)out.push({id:"data-stale",text:fill(k==="stand-in"?D.waiting:D.staleLine,v)});
 if(i.held)out.push({id:"data-held",text:fill(D.held,v)});
 return out;}
"""#

    static let js = #"""
(function(){
"use strict";
"""# + values + dataStatus + #"""
const cfg=JSON.parse(document.getElementById("page-config").textContent);
const S=cfg.strings;
const D=cfg.dataText;
const nf=new Intl.NumberFormat(cfg.lang==="de"?"de-DE":"en-GB",{minimumFractionDigits:1,maximumFractionDigits:1});
const rank={green:0,yellow:1,red:2,darkred:3,outside:-1,none:-2};
const $=(id)=>document.getElementById(id);
/* Text, attributes and text children go through show(): an object from the API reads as its fields. */
function el(tag,attrs,children){const e=document.createElement(tag);
 if(attrs)for(const k in attrs){const v=attrs[k];if(k==="cls")e.className=v;else if(k==="text")e.textContent=typeof v==="string"?v:show(v);
  else e.setAttribute(k,typeof v==="string"?v:show(v));}
 if(children)for(const c of children)if(c!=null)e.append(typeof c==="string"||c instanceof Node?c:show(c));return e;}
function inc(v){return (typeof v==="number"&&isFinite(v))?nf.format(v):"–";}
function phaseName(p){return S[p]||p||"–";}
function age(seconds){if(seconds==null||!isFinite(seconds))return "–";seconds=Math.max(0,Math.round(seconds));
 const u=seconds<90?[seconds,"s"]:seconds<5400?[Math.round(seconds/60),"min"]:seconds<172800?[Math.round(seconds/3600),"h"]:[Math.round(seconds/86400),"d"];
 return cfg.lang==="de"?S.ago+" "+u[0]+" "+u[1]:u[0]+" "+u[1]+" "+S.ago;}
function list(json,key){if(Array.isArray(json))return json;if(json&&Array.isArray(json[key]))return json[key];if(json&&Array.isArray(json.items))return json.items;return [];}
async function get(path){const r=await fetch(path,{headers:{"Accept":"application/json"},cache:"no-store"});if(!r.ok)throw new Error(path+": "+r.status);return r.json();}

/* Map and district list */
const tip=$("tooltip");
const paths=new Map();document.querySelectorAll("#map .district").forEach(p=>paths.set(p.dataset.ags,p));
function showTip(p,ev){const d=p.dataset;tip.replaceChildren(el("b",{text:d.name}),
 el("div",{text:S.incidence+": "+inc(d.incidence===undefined?null:Number(d.incidence))}),
 el("div",{text:S.phase+": "+phaseName(d.phase)}),
 el("div",{text:S.dataDate+": "+dataBadge(cfg.data,D).text}));
 tip.hidden=false;const x=Math.min(ev.clientX+14,window.innerWidth-tip.offsetWidth-8),y=Math.min(ev.clientY+14,window.innerHeight-tip.offsetHeight-8);
 tip.style.left=x+"px";tip.style.top=y+"px";}
paths.forEach(p=>{p.addEventListener("mousemove",ev=>showTip(p,ev));p.addEventListener("mouseleave",()=>{tip.hidden=true;});
 p.addEventListener("click",()=>{location.href="/districts/"+p.dataset.ags+"?lang="+cfg.lang;});});
const tbody=document.querySelector("#district-table tbody");
let sortKey="name",sortDir=1;
/* "LK München" and "SK München" sort together, under M. */
function bare(name){return name.replace(/^(LK|SK) /,"");}
function districtRow(d){return el("tr",{"data-ags":d.ags,"data-name":d.name,"data-incidence":d.incidence==null?"":String(d.incidence),"data-rank":String(rank[d.phase]??-2)},[
 el("td",null,[el("a",{href:"/districts/"+encodeURIComponent(d.ags)+"?lang="+cfg.lang,text:d.name})]),
 el("td",{cls:"num",text:inc(d.incidence)}),
 el("td",{cls:"phase"},[el("span",{cls:"dot",style:"background:"+d.fill}),phaseName(d.phase)])]);}
function sortRows(){const rows=[...tbody.rows];const coll=new Intl.Collator(cfg.lang);
 rows.sort((a,b)=>{let c=0;if(sortKey==="incidence"){c=(parseFloat(a.dataset.incidence)||-1)-(parseFloat(b.dataset.incidence)||-1);}
  else if(sortKey==="phase"){c=Number(a.dataset.rank)-Number(b.dataset.rank)||(parseFloat(a.dataset.incidence)||-1)-(parseFloat(b.dataset.incidence)||-1);}
  if(c===0)c=coll.compare(bare(a.dataset.name),bare(b.dataset.name))||coll.compare(a.dataset.name,b.dataset.name);return c*sortDir;});
 tbody.append(...rows);
 document.querySelectorAll("#district-table th[data-sort]").forEach(th=>th.setAttribute("aria-sort",th.dataset.sort===sortKey?(sortDir>0?"ascending":"descending"):"none"));}
function filterRows(){const q=$("district-filter").value.trim().toLocaleLowerCase();
 for(const r of tbody.rows)r.hidden=q!==""&&!r.dataset.name.toLocaleLowerCase().includes(q);}
document.querySelectorAll("#district-table th[data-sort]").forEach(th=>th.addEventListener("click",()=>{
 if(sortKey===th.dataset.sort)sortDir=-sortDir;else{sortKey=th.dataset.sort;sortDir=sortKey==="name"?1:-1;}sortRows();}));
$("district-filter").addEventListener("input",filterRows);
/* The header's badge, the lines under it and the map's hatching, from bridge/info at each poll. */
function renderData(info){cfg.data=info;const b=dataBadge(info,D),badge=$("data-badge");
 if(badge.textContent!==b.text)badge.textContent=b.text;badge.className="pill data "+b.tone;badge.title=b.title;
 const lines=dataNotices(info,D),box=$("data-notice");
 /* Rewritten only when a line changed: the box is an alert, read out again at each change. */
 const same=box.children.length===lines.length&&lines.every((l,n)=>box.children[n].id===l.id&&box.children[n].textContent===l.text);
 if(!same)box.replaceChildren(...lines.map(l=>el("p",{id:l.id,text:l.text})));box.hidden=!lines.length;
 $("map").classList.toggle("stale",!!info.stale);}
async function pollDistricts(){const json=await get(cfg.api.districts);const items=list(json,"districts");
 for(const s of items){const ags=s.ags||(s.district&&s.district.ags);const p=paths.get(ags);if(!p)continue;
  const phase=s.phase||"none";const fill=s.color||cfg.noDataFill;
  if(p.getAttribute("fill")!==fill)p.setAttribute("fill",fill);p.dataset.phase=phase;
  if(typeof s.incidence==="number")p.dataset.incidence=String(s.incidence);else delete p.dataset.incidence;
  const row=tbody.querySelector('tr[data-ags="'+ags+'"]');const name=(s.district&&s.district.name)||p.dataset.name;
  const fresh=districtRow({ags:ags,name:name,incidence:typeof s.incidence==="number"?s.incidence:null,phase:phase,fill:fill});
  if(row){fresh.hidden=row.hidden;row.replaceWith(fresh);}else tbody.append(fresh);}
 sortRows();}

/* Devices: one page at a time from the API, never the whole table */
const dev={cursors:[""],index:0,q:"",limit:cfg.pageSize,next:null};
function deviceRow(d){let district=d.district?(d.district.name||d.district.ags):"–";
 /* Positions come only with http.show_positions. */
 if(typeof d.lat==="number"&&typeof d.lon==="number")district+=" ("+d.lat.toFixed(4)+", "+d.lon.toFixed(4)+")";const phase=d.phase||"none";
 const tst=typeof d.tst==="number"?d.tst:null;
 return el("tr",{"data-key":d.device||d.key||""},[el("td",{cls:"key",text:d.device||d.key||"",title:d.device||d.key||""}),
  el("td",{cls:"wrap",text:district}),
  el("td",{cls:"phase"},[el("span",{cls:"dot",style:"background:"+(d.color||cfg.phaseColors[phase]||cfg.noDataFill)}),phaseName(phase)]),
  el("td",{cls:"num fix",text:tst==null?"–":age(Date.now()/1000-tst)}),
  /* The language its state is in (configured, else asked for, else the daemon's), not only the one it asked for. */
  el("td",{cls:"hide-narrow",text:d.stateLang||d.lang||"–"})]);}
async function pollDevices(){const params=new URLSearchParams({limit:String(dev.limit)});
 if(dev.cursors[dev.index])params.set("cursor",dev.cursors[dev.index]);if(dev.q)params.set("q",dev.q);
 const json=await get(cfg.api.devices+"?"+params);const items=list(json,"devices");
 const body=document.querySelector("#device-table tbody");
 body.replaceChildren(...(items.length?items.map(deviceRow):[el("tr",null,[el("td",{colspan:"5",cls:"empty",text:S.noDevices})])]));
 dev.next=(json&&(json.next||json.nextCursor))||null;
 const total=json&&typeof json.total==="number"?json.total:null;const first=dev.index*dev.limit;
 $("device-range").textContent=items.length?(first+1)+"–"+(first+items.length)+(total!=null?" / "+total:""):(total!=null?"0 / "+total:"");
 $("device-prev").disabled=dev.index===0;$("device-next").disabled=!dev.next;}
$("device-prev").addEventListener("click",()=>{if(dev.index>0){dev.index--;pollDevices().catch(down);}});
$("device-next").addEventListener("click",()=>{if(dev.next){dev.cursors[dev.index+1]=dev.next;dev.index++;pollDevices().catch(down);}});
let searchTimer=null;
$("device-search").addEventListener("input",ev=>{clearTimeout(searchTimer);searchTimer=setTimeout(()=>{dev.q=ev.target.value.trim();dev.cursors=[""];dev.index=0;pollDevices().catch(down);},250);});

/* Bridge and lamps */
function fact(dl,name,value,cls){dl.append(el("dt",{text:name}),el("dd",cls?{cls:cls,text:value}:{text:value}));}
function renderBridge(b){const info=b.info||{};const dl=$("bridge-facts");dl.replaceChildren();
 if(b.info)renderData(b.info);
 /* The kind, not "current": old fixed data is a snapshot of its day, not stale and not current. */
 const kind=kindOf(info,D),tone=dataBadge(info,D).tone;
 fact(dl,cfg.text.source,info.source||"–");
 fact(dl,cfg.text.dataKind,D.kinds[kind]+(kind==="live"&&info.stale?" ("+D.stale+")":""),tone==="ok"?"state-on":tone==="warn"?"state-off":null);
 fact(dl,S.dataDate,info.dataDate||"–");
 if(info.dataDate){const d=Date.parse(info.dataDate+"T00:00:00Z");if(isFinite(d))fact(dl,cfg.text.age,age(Date.now()/1000-d/1000));}
 fact(dl,cfg.text.lastRefresh,info.lastFetch?new Date(info.lastFetch).toLocaleString(cfg.lang):S.never);
 if(info.lastCheck)fact(dl,cfg.text.lastCheck,new Date(info.lastCheck).toLocaleString(cfg.lang));
 if(info.journalError)fact(dl,cfg.text.journal,info.journalError,"state-off");
 else if(info.lastError)fact(dl,cfg.text.lastError,info.lastError);
 if(info.held)fact(dl,cfg.text.held,info.held,"state-off");
 if(info.stateRecovered)fact(dl,cfg.text.stateRecovered,info.stateRecovered,"state-off");
 if(typeof info.devices==="number")fact(dl,cfg.text.devices,String(info.devices));
 const counters=el("div",{cls:"counters"},counterTexts(info.counters).map(t=>el("span",{text:t})));
 dl.append(el("dt",{text:cfg.text.counters}),el("dd",null,[counters]));
 const errs=b.errors||[];const ol=$("bridge-errors");
 ol.replaceChildren(...(errs.length?errs.slice(-50).reverse().map(e=>el("li",null,[
  e.at?el("time",{text:new Date(e.at).toLocaleString(cfg.lang)}):null,
  [e.kind,e.reason].filter(Boolean).map(show).join(" · ")+(e.topic?" – "+show(e.topic):"")+(e.detail?": "+show(e.detail):"")])):[el("li",{cls:"empty",text:S.noErrors})]));
 if(Array.isArray(b.lamps))renderLamps(b.lamps);}
function follows(f){if(!f)return "–";if(f.district)return cfg.text.district+" "+f.district;if(f.device)return cfg.text.device+" "+f.device;return "–";}
function renderLamps(lamps){const body=document.querySelector("#lamp-table tbody");
 body.replaceChildren(...(lamps.length?lamps.map(l=>{const state=l.online===true?"on":l.online===false?"off":"unknown";
  return el("tr",{"data-lamp":l.name||""},[el("td",{cls:"key",text:l.name||""}),el("td",{cls:"hide-phone",text:l.driver||"–"}),el("td",{cls:"wrap",text:follows(l.follows)}),
   el("td",{cls:state==="on"?"state-on":state==="off"?"state-off":"",text:state==="on"?S.online:state==="off"?S.offline:"–"}),
   el("td",null,[el("span",{cls:"dot",style:"background:"+(l.color||"transparent")}),(l.color||"–")+(l.blink?" "+cfg.text.blink:"")])]);}):
  [el("tr",null,[el("td",{colspan:"5",cls:"empty",text:S.noLamps})])]));}
async function pollBridge(){const b=await get(cfg.api.bridge);renderBridge(b);return b;}
/* The districts' signals carry the rule texts (76 KB for 96): fetched again only when the
   bridge reports other data or staleness, and every 20th poll as a safety net. */
let districtsKey=null,sinceDistricts=0;
function dataKey(b){const i=(b&&b.info)||{};return [i.dataDate,i.dataKind,i.stale,i.source,(i.counters||{}).datasetsApplied].join("|");}
async function pollLamps(){if(cfg.api.lamps)renderLamps(list(await get(cfg.api.lamps),"lamps"));}

/* The page's link to the daemon (its polls answered or not), not the data's freshness. */
function down(){$("connection").classList.add("down");$("connection").textContent=S.disconnected;}
function up(){$("connection").classList.remove("down");$("connection").textContent=S.connected;}
let busy=false;
async function tick(){if(busy||document.hidden)return;busy=true;
 try{const [b]=await Promise.all([pollBridge(),pollDevices(),pollLamps()]);const key=dataKey(b);
  if(key!==districtsKey||++sinceDistricts>=20){await pollDistricts();districtsKey=key;sinceDistricts=0;}up();
  document.body.dataset.polls=String(Number(document.body.dataset.polls||0)+1);}catch(e){down();}finally{busy=false;}}
sortRows();tick();setInterval(tick,cfg.pollMs);
document.addEventListener("visibilitychange",tick);
})();
"""#
}
