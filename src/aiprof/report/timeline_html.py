"""The report's timeline of every CPU thread and GPU stream, with a step picker, a legend
and zoom. Only renders a ``StepTimeline``; the data goes in a non-executable JSON block with
``<``, ``>`` and ``&`` escaped, and trace strings reach the page through ``textContent``."""

from __future__ import annotations

import json

from aiprof.analysis.timeline_steps import KINDS, StepTimeline

COLORS = ("#999999", "#CC79A7", "#E69F00", "#0072B2", "#D55E00", "#009E73")
"""One per kind (op, annotation, runtime, kernel, memcpy, memset): Okabe & Ito's palette."""


def timeline_section(tl: StepTimeline) -> str:
    if not tl.steps:
        return '<section id="timeline-all"><h2>Timeline</h2><p>No steps.</p></section>'
    payload = {
        "lanes": tl.lanes, "names": tl.names, "kinds": list(KINDS), "colors": list(COLORS),
        "steps": [{"number": s.number, "dur": round(s.duration_us, 3),
                   "spans": [[int(a), round(float(b), 3), round(float(c), 3), int(d), int(e)]
                             for a, b, c, d, e in zip(s.lane, s.start_us, s.dur_us, s.kind,
                                                      s.name, strict=True)]}
                  for s in tl.steps],
    }
    text = json.dumps(payload, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    more = (f" (the first {len(tl.steps)} of {tl.num_steps} steps)"
            if tl.num_steps > len(tl.steps) else "")
    return (
        '<section id="timeline-all"><h2>Timeline: every thread and stream</h2>'
        f'<div class="controls">step{more}: <select id="tl-step"></select> '
        '<button id="tl-in">zoom in</button><button id="tl-out">zoom out</button>'
        '<button id="tl-reset">whole step</button> (mouse wheel zooms; hover a bar)</div>'
        '<div id="tl-legend" class="legend"></div>'
        '<svg id="tl-all" xmlns="http://www.w3.org/2000/svg" '
        'style="border:1px solid #ccc;width:100%;height:auto;background:#fff"></svg>'
        f'<script type="application/json" id="tl-data">{text}</script>'
        f"<script>{SCRIPT}</script></section>"
    )


SCRIPT = """
(function(){
var d=JSON.parse(document.getElementById('tl-data').textContent);
var svg=document.getElementById('tl-all'),pick=document.getElementById('tl-step');
var NS='http://www.w3.org/2000/svg',W=1100,LH=20,LEFT=170,step=0,view=[0,1];
function el(n,a){var e=document.createElementNS(NS,n);for(var k in a){e.setAttribute(k,a[k]);}
  return e;}
d.steps.forEach(function(s,i){var o=document.createElement('option');o.value=i;
  o.textContent='#'+s.number+' ('+(s.dur/1000).toFixed(2)+' ms)';pick.appendChild(o);});
var legend=document.getElementById('tl-legend');
d.kinds.forEach(function(k,i){var s=document.createElement('span'),w=document.createElement('i');
  w.className='sw';w.style.background=d.colors[i];s.appendChild(w);
  s.appendChild(document.createTextNode(k));legend.appendChild(s);});
function draw(){
  while(svg.firstChild){svg.removeChild(svg.firstChild);}
  var s=d.steps[step],used={},order=[];
  s.spans.forEach(function(p){if(!(p[0] in used)){used[p[0]]=1;order.push(p[0]);}});
  order.sort(function(a,b){return a-b;});
  var row={};order.forEach(function(l,i){row[l]=i;});
  var H=order.length*LH+30,span=Math.max(view[1]-view[0],1e-3);
  svg.setAttribute('viewBox','0 0 '+(W+LEFT)+' '+H);
  order.forEach(function(l,i){var t=el('text',{x:4,y:i*LH+14,'font-size':11});
    t.textContent=d.lanes[l];svg.appendChild(t);});
  s.spans.forEach(function(p){
    var x0=Math.max(p[1],view[0]),x1=Math.min(p[1]+p[2],view[1]);
    if(x1<view[0]||x0>view[1]){return;}
    var r=el('rect',{x:LEFT+(x0-view[0])/span*W,y:row[p[0]]*LH+3,
      width:Math.max((x1-x0)/span*W,0.5),height:LH-6,fill:d.colors[p[3]]});
    var t=el('title',{});t.textContent=d.names[p[4]]+' ('+p[2].toFixed(1)+' us)';
    r.appendChild(t);svg.appendChild(r);});
  var axis=el('text',{x:LEFT,y:H-8,'font-size':11});
  axis.textContent=view[0].toFixed(0)+' us .. '+view[1].toFixed(0)+' us of step #'+s.number;
  svg.appendChild(axis);
}
function reset(){view=[0,Math.max(d.steps[step].dur,1)];draw();}
function zoom(f,c){var sp=view[1]-view[0];c=(c===undefined)?(view[0]+view[1])/2:c;
  var n=Math.max(sp*f,1);view=[Math.max(0,c-n/2),Math.min(d.steps[step].dur,c+n/2)];draw();}
pick.addEventListener('change',function(){step=parseInt(pick.value,10);reset();});
document.getElementById('tl-in').addEventListener('click',function(){zoom(0.5);});
document.getElementById('tl-out').addEventListener('click',function(){zoom(2);});
document.getElementById('tl-reset').addEventListener('click',reset);
svg.addEventListener('wheel',function(ev){ev.preventDefault();
  var b=svg.getBoundingClientRect(),fx=(ev.clientX-b.left)/b.width*(W+LEFT)-LEFT;
  zoom(ev.deltaY<0?0.7:1.4,view[0]+Math.max(0,fx)/W*(view[1]-view[0]));});
reset();
svg.setAttribute('data-steps',String(d.steps.length));
})();
"""
