"""The one stylesheet and the one script, inline in every page (no CDN: works offline)."""

from __future__ import annotations

__all__ = ["CSS", "JS"]

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1f2937;color:#fff;padding:.5rem 1rem;display:flex;gap:1rem;align-items:center}
header a{color:#fff}header .asof{margin-left:auto;font-size:12px;opacity:.85}
main{padding:1rem}h1{font-size:20px;margin:.2rem 0 .6rem}h2{font-size:16px;margin:1rem 0 .4rem}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border-bottom:1px solid #e5e7eb;padding:3px 8px;text-align:left;white-space:nowrap}
th{background:#f3f4f6;position:sticky;top:0}th a{color:inherit}
tr.sel{outline:2px solid #2563eb;background:#eff6ff}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{padding:1px 6px;border-radius:3px;color:#fff;background:#6b7280}
.improved{background:#15803d}.regressed{background:#b91c1c}.unchanged{background:#1d4ed8}
.won-c{background:#ecfdf5}.won-p{background:#fef2f2}
.pager{margin:.5rem 0}.pager a{margin-right:.6rem}
#live{display:none;background:#fde68a;padding:.4rem 1rem}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:1rem}.note{color:#4b5563}
.err{color:#b91c1c}input[type=search]{width:22rem;padding:3px}
kbd{border:1px solid #9ca3af;border-radius:3px;padding:0 3px;font-size:12px}
.scroll{overflow-x:auto;max-width:100%}.cols>section{min-width:0}
h1,h2,p{overflow-wrap:anywhere}.chart img,svg.timeline{max-width:100%;height:auto}
.transcript .msg{border-left:3px solid #9ca3af;background:#fff;margin:.4rem 0;padding:.3rem .6rem}
.transcript .msg.user{border-color:#2563eb}.transcript .msg.assistant{border-color:#15803d}
.transcript .msg.tool{border-color:#b45309}.transcript .msg.system{border-color:#6b7280}
.transcript .role{font-size:12px;font-weight:600;text-transform:uppercase;color:#4b5563}
.transcript pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2rem 0;font:13px/1.4 ui-monospace,monospace}
"""

# j/k or arrows move the selected row, Enter opens it, "/" focuses the filter, "p" / "c" pick
# the selected run as parent / candidate; /api/version is polled for new data.
JS = """
(function(){
const rows=()=>Array.from(document.querySelectorAll('tr[data-row]'));
let cur=-1;
function sel(i){const r=rows();if(!r.length)return;cur=Math.max(0,Math.min(i,r.length-1));
 r.forEach(x=>x.classList.remove('sel'));r[cur].classList.add('sel');r[cur].scrollIntoView({block:'nearest'});}
document.addEventListener('keydown',e=>{
 const t=e.target;if(t.tagName==='INPUT'&&t.type==='search'){if(e.key==='Escape')t.blur();return;}
 if(e.key==='j'||e.key==='ArrowDown'){sel(cur+1);e.preventDefault();}
 else if(e.key==='k'||e.key==='ArrowUp'){sel(cur-1);e.preventDefault();}
 else if(e.key==='/'){const f=document.getElementById('filter');if(f){f.focus();e.preventDefault();}}
 else if(cur>=0&&(e.key==='p'||e.key==='c')){const r=rows()[cur];
  const b=r.querySelector(e.key==='p'?'input[name=parent]':'input[name=candidate]');if(b){b.click();}}
 else if(e.key==='Enter'&&cur>=0&&t.tagName!=='INPUT'&&t.tagName!=='BUTTON'&&t.tagName!=='A'){
  const h=rows()[cur].dataset.href;if(h){location.href=h;}
  else{const f=document.getElementById('pick');if(f)f.requestSubmit();}}
});
const f=document.getElementById('filter');
if(f){f.addEventListener('input',()=>{const q=f.value.toLowerCase();
 rows().forEach(r=>{r.style.display=r.textContent.toLowerCase().includes(q)?'':'none';});});}
const v=document.body.dataset.version,mode=document.body.dataset.live;
async function poll(){try{const r=await fetch('/api/version',{cache:'no-store'});const j=await r.json();
 if(String(j.version)!==v){if(mode==='reload'&&!(f&&f===document.activeElement)){location.reload();return;}
  const b=document.getElementById('live');b.style.display='block';}}catch(e){}
 setTimeout(poll,2000);}
setTimeout(poll,2000);
})();
"""
