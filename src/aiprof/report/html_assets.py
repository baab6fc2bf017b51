"""The report's inline CSS and JavaScript (no network: GPU machines are often offline).

The script sorts tables by clicking their headers and draws the step timeline as SVG from a
JSON block; trace strings reach the page only through ``textContent`` (never ``innerHTML``).
"""

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3;cursor:pointer;user-select:none}td.num{text-align:right}
.name{max-width:560px;overflow-wrap:anywhere;font-family:monospace;font-size:.85em}
.sev-high{color:#b00020;font-weight:bold}.sev-medium{color:#a65f00}.sev-low{color:#777}
.bar{display:flex;height:22px;width:100%;max-width:800px;border:1px solid #aaa}
.bar div{height:100%}.legend span{display:inline-block;margin-right:1em}
.sw{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}
.finding{border-left:4px solid #0072B2;padding:.2em .8em;margin:.8em 0;background:#fafafa}
.verdict{font-size:1.1em;padding:.6em;background:#eef5fb;border:1px solid #b6d4ea}
#timeline{border:1px solid #ccc;width:100%;height:auto;background:#fff}
.controls button{margin-right:.4em}pre{white-space:pre-wrap;font-size:.85em}
"""

JS = """
(function(){
function sortTable(th){
  var table=th.closest('table'),body=table.tBodies[0],col=th.cellIndex;
  var asc=th.getAttribute('data-dir')!=='asc';th.setAttribute('data-dir',asc?'asc':'desc');
  var rows=Array.prototype.slice.call(body.rows);
  rows.sort(function(a,b){
    var x=a.cells[col].getAttribute('data-v')||a.cells[col].textContent;
    var y=b.cells[col].getAttribute('data-v')||b.cells[col].textContent;
    var nx=parseFloat(x),ny=parseFloat(y);
    var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});
  rows.forEach(function(r){body.appendChild(r);});
}
document.querySelectorAll('table.sortable th').forEach(function(th){
  th.addEventListener('click',function(){sortTable(th);});});
var data=document.getElementById('timeline-data');if(!data){return;}
var tl=JSON.parse(data.textContent),svg=document.getElementById('timeline');
var NS='http://www.w3.org/2000/svg',lanes=[],laneOf={},W=1100,LH=22,LEFT=170;
tl.ops.forEach(function(o){
  if(!(o.lane in laneOf)){laneOf[o.lane]=lanes.length;lanes.push(o.lane);}});
var H=lanes.length*LH+30,view=[0,Math.max(tl.step_us,1)];
svg.setAttribute('viewBox','0 0 '+(W+LEFT)+' '+H);
var colors={kernel:'#0072B2',memcpy:'#D55E00',memset:'#009E73'};
function el(name,attrs){var e=document.createElementNS(NS,name);
  for(var k in attrs){e.setAttribute(k,attrs[k]);}return e;}
function draw(){
  while(svg.firstChild){svg.removeChild(svg.firstChild);}
  var span=view[1]-view[0];
  lanes.forEach(function(l,i){var t=el('text',{x:4,y:i*LH+15,'font-size':11});
    t.textContent=l;svg.appendChild(t);});
  tl.ops.forEach(function(o){
    var x0=Math.max(o.start_us,view[0]),x1=Math.min(o.start_us+o.dur_us,view[1]);
    if(x1<view[0]||x0>view[1]){return;}
    var r=el('rect',{x:LEFT+(x0-view[0])/span*W,y:laneOf[o.lane]*LH+3,
      width:Math.max((x1-x0)/span*W,0.5),height:LH-6,fill:colors[o.kind]||'#777'});
    var title=el('title',{});title.textContent=o.name+' ('+o.dur_us.toFixed(1)+' us)';
    r.appendChild(title);svg.appendChild(r);});
  var axis=el('text',{x:LEFT,y:H-8,'font-size':11});
  axis.textContent=view[0].toFixed(0)+' us .. '+view[1].toFixed(0)+' us of step';
  svg.appendChild(axis);
}
function zoom(f,center){var span=view[1]-view[0],c=center===undefined?(view[0]+view[1])/2:center;
  var ns=Math.max(span*f,1);view=[Math.max(0,c-ns/2),Math.min(tl.step_us,c+ns/2)];draw();}
document.getElementById('zoom-in').addEventListener('click',function(){zoom(0.5);});
document.getElementById('zoom-out').addEventListener('click',function(){zoom(2);});
document.getElementById('zoom-reset').addEventListener('click',function(){view=[0,tl.step_us];draw();});
svg.addEventListener('wheel',function(ev){ev.preventDefault();
  var box=svg.getBoundingClientRect(),fx=(ev.clientX-box.left)/box.width*(W+LEFT)-LEFT;
  var c=view[0]+Math.max(0,fx)/W*(view[1]-view[0]);zoom(ev.deltaY<0?0.7:1.4,c);});
draw();
document.body.setAttribute('data-ready','1');
})();
"""
