#!/usr/bin/env python3
"""test_html.py - the HTML report in a real browser (issue 18).

Usage: test_html.py SHARDLENS SOURCE_DIR

Partitions two samples with `shardlens analyze` (which writes report.html), writes a page with
`shardlens html --mesh`, and a diff page, then loads each in headless Chromium with a
test-only script added at the end of the page. That script lets the page's own script run,
then clicks the first row of the collectives table, searches an op by name, and writes what it
saw into the DOM, which `chromium --dump-dom` prints. Asserted: one table row per collective
of the trace (counted with SQL), the first row's explanation is `shardlens explain`'s text for
its source op, the search finds and highlights the op, no script error reached the console,
and the page fetches nothing (no http(s) src/href, a CSP that allows no network). A 12-layer
generated transformer starts collapsed into 10 to 60 group boxes; clicking boxes down to a
group that holds ops shows exactly that group's ops and boxes (as the page's own tree says), a
group left undrawn lists its instructions with links that select them, and the live-bytes
chart marks the trace's peak. A module whose shardings propagation filled in shows, for the
op searched, the origin line `shardlens explain` prints. A missing trace is exit 2 with no
page.
Python standard library only; Chromium must be installed (tools/bootstrap.sh test does it).
"""
import html
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

FAILS = []

PRELUDE = ("<script>window.__errors=[];window.addEventListener('error',function(e){"
           "window.__errors.push(String(e.message))});(function(){var ce=console.error;"
           "console.error=function(){window.__errors.push([].slice.call(arguments).join(' '));"
           "ce.apply(console,arguments)}})();</script>")

PROBE = """<script>(function(){
var r={}, q=function(s){return document.querySelector(s)};
r.ready=document.body.getAttribute('data-ready');
r.totals=q('#totals').textContent;
r.startNote=q('#graph-note').textContent;
r.rows=document.querySelectorAll('#collectives tbody tr').length;
var first=q('#collectives tbody tr');
if(first){first.click();r.first=first.cells[0].textContent;r.explain=q('#explain').textContent;}
var s=q('#search');s.value=%(name)s;s.dispatchEvent(new Event('change'));
r.found=q('#search-result').getAttribute('data-found');
r.search=q('#search-result').textContent;
var hit=q('#graph .hit title');r.hit=hit?hit.textContent:null;
r.diffRows=document.querySelectorAll('#diff .diff-row').length;
r.diffNew=document.querySelectorAll('#diff .diff-row.diff-new').length;
r.diffHidden=q('#diff').hidden;
r.meshCells=document.querySelectorAll('#mesh td').length;
r.inGroup=document.querySelectorAll('#mesh td.in-group').length;
r.treeNodes=document.querySelectorAll('#tree details').length;
r.graphNote=q('#graph-note').textContent;
function titles(){return [].slice.call(document.querySelectorAll('#graph g.node title')).map(
  function(t){return t.textContent;});}
function nodeOf(id){return [].slice.call(document.querySelectorAll('#graph g.node')).filter(
  function(n){var tt=n.querySelector('title');return tt&&tt.textContent===id;})[0];}
function clickNode(id){var n=nodeOf(id);if(n)n.dispatchEvent(new MouseEvent('click',{bubbles:true}));
  return !!n;}
function tab(k){var b=document.querySelector('.tab[data-key='+k+']');if(b)b.click();}
tab('after');
r.hBoxes=titles().filter(function(t){return /^h[0-9]+$/.test(t);}).length;
r.expandPath=[];
for(var d=0;d<16;d++){var ts=titles();
  if(ts.some(function(t){return /^a[0-9]+$/.test(t);})){r.opView=ts;break;}
  var hs=ts.filter(function(t){return /^h[0-9]+$/.test(t);});if(!hs.length)break;
  var busy=hs.filter(function(t){return /sends/.test(nodeOf(t).textContent);});
  var h=(busy.length?busy:hs)[0];r.expandPath.push(h);clickNode(h);}
var cr=document.querySelectorAll('#crumbs a');r.crumbs=cr.length;
r.crumbGroup=cr.length?+cr[cr.length-1].getAttribute('data-group'):null;
tab('before');var chain=%(chain)s;
for(var k=0;k<chain.length;k++)clickNode('h'+chain[k]);
var gl=q('#group-list');
r.list=gl?{text:gl.querySelector('.too-large').textContent,
  rows:gl.querySelectorAll('table.ops tr').length}:null;
if(gl){var a=gl.querySelector('table.ops a');if(a){a.click();
  r.listSelected=q('#op').getAttribute('data-instr');}}
var s2=q('#search');s2.value=%(origin)s;s2.dispatchEvent(new Event('change'));
r.origin=q('#op-origin').textContent;r.opText=q('#op').textContent;
var pk=q('#memory-peak');r.peak=pk?+pk.getAttribute('data-peak'):null;
r.peakMax=pk?+pk.getAttribute('data-max'):null;
r.peakLabel=(q('#memory-peak-label')||{}).textContent||null;
r.memTop=document.querySelectorAll('#memory-top tr').length-1;
r.errors=window.__errors;
var pre=document.createElement('pre');pre.id='test-result';pre.textContent=JSON.stringify(r);
document.body.appendChild(pre);})();</script>"""


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print('FAIL: ' + what, file=sys.stderr)


def chromium():
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        path = shutil.which(name)
        if path:
            return path
    sys.exit('test_html.py: chromium is not installed (apt-get install -y chromium); '
             'tools/bootstrap.sh test installs it')


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        sys.exit('test_html.py: %s failed (%d):\n%s%s' % (' '.join(cmd), p.returncode, p.stdout,
                                                          p.stderr))
    return p.stdout


def page_data(page):
    """The page's own data (the JSON report.js reads)."""
    text = open(page, encoding='utf-8').read()
    m = re.search(r'<script type="application/json" id="data">\n(.*?)\n</script>', text, re.S)
    return json.loads(m.group(1))


def unrle(a):
    out = []
    for k in range(0, len(a), 2):
        out += [a[k]] * a[k + 1]
    return out


def browse(page, tmp, name, chain=(), origin=None):
    """Loads `page` with the probe added; returns the probe's result and Chromium's log."""
    text = open(page, encoding='utf-8').read()
    probed = os.path.join(tmp, 'probed-' + os.path.basename(page))
    text = text.replace('<head>', '<head>' + PRELUDE, 1)
    text = text.replace('</body>', PROBE % {'name': json.dumps(name), 'chain': json.dumps(list(chain)),
                                            'origin': json.dumps(origin or name)} + '</body>', 1)
    open(probed, 'w', encoding='utf-8').write(text)
    profile = tempfile.mkdtemp(dir=tmp, prefix='profile-')
    p = subprocess.run([chromium(), '--headless', '--no-sandbox', '--disable-gpu',
                        '--disable-quic', '--no-first-run', '--disable-background-networking',
                        '--disable-component-update', '--disable-sync', '--enable-logging=stderr',
                        '--user-data-dir=' + profile, '--virtual-time-budget=10000',
                        '--window-size=1280,800', '--dump-dom', 'file://' + probed],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    m = re.search(r'<pre id="test-result">(.*?)</pre>', p.stdout, re.S)
    if not m:
        sys.exit('test_html.py: the probe did not run in %s (exit %d):\n%s' %
                 (page, p.returncode, p.stderr[-3000:]))
    return json.loads(html.unescape(m.group(1))), p.stderr


def latest_run(db):
    c = sqlite3.connect(db)
    rid = c.execute('SELECT MAX(id) FROM run').fetchone()[0]
    return c, rid


def static_checks(page):
    text = open(page, encoding='utf-8').read()
    check(not re.search(r'''(src|href)\s*=\s*["']?\s*(https?:)?//''', text, re.I),
          page + ': a src/href pointing to the network')
    check("default-src 'none'" in text, page + ': no CSP forbidding fetches')
    check('<script src' not in text and '<link' not in text, page + ': external script/style')
    return len(text.encode('utf-8'))


def main():
    shardlens, src = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix='shardlens-html-')
    try:
        mlp = os.path.join(tmp, 'mlp')
        run([shardlens, 'analyze', os.path.join(src, 'samples', 'mlp_megatron.hlo'), '--out', mlp])
        db = os.path.join(mlp, 'trace.db')
        page = os.path.join(mlp, 'report.html')
        check(os.path.exists(page), 'analyze wrote no report.html')
        static_checks(page)
        c, rid = latest_run(db)
        n_coll = c.execute('SELECT COUNT(*) FROM collective WHERE run_id=?', (rid,)).fetchone()[0]
        check(n_coll > 0, 'the sample has collectives')
        name = c.execute("SELECT name FROM instr WHERE run_id=? AND phase='before' AND "
                         "opcode='dot' ORDER BY id LIMIT 1", (rid,)).fetchone()[0]
        r, log = browse(page, tmp, name)
        check(r['ready'] is not None, 'the page script did not finish')
        check(r['rows'] == n_coll, 'table rows %r, collectives %d' % (r['rows'], n_coll))
        # The first row (sorted by bytes sent, most first) and its source's explanation.
        first = c.execute(
            'SELECT i.name, s.name FROM collective k JOIN instr i ON i.id = k.instr '
            'JOIN instr s ON s.id = k.source WHERE k.run_id=? AND i.name=?',
            (rid, r.get('first'))).fetchone()
        check(first is not None, 'first row %r is not a collective of the trace' % r.get('first'))
        if first:
            want = run([shardlens, 'explain', db, first[1]])
            got = r.get('explain') or ''
            check(want.strip() in got, 'explanation of %s not shown; got:\n%s' % (first[1], got))
        check(r['found'] == name, 'search for %s found %r (%s)' % (name, r['found'], r['search']))
        check(r['hit'] is not None and r['hit'].startswith('b'),
              'search did not highlight a node of the before graph: %r' % r['hit'])
        check(r['diffHidden'] is True, 'a single run shows no diff')
        check(r['treeNodes'] > 0, 'no op_name tree')
        check(not r['errors'], 'console errors: %r' % r['errors'])
        check('Uncaught' not in log, 'an uncaught exception in the log:\n' + log[-2000:])

        # --mesh: the mesh has one cell per device and hovering/selecting shows a group.
        mesh_page = os.path.join(tmp, 'mesh.html')
        run([shardlens, 'html', db, '-o', mesh_page, '--mesh', 'data=2,model=2'])
        r, log = browse(mesh_page, tmp, name)
        check(r['meshCells'] == 4, 'mesh cells %r, devices 4' % r['meshCells'])
        check(r['inGroup'] >= 2, 'the first collective outlines no group on the mesh')
        check(not r['errors'], 'mesh page console errors: %r' % r['errors'])

        # A custom call partitioned by fallback: its traffic (an all-gather of f32[8,16] over 4
        # devices, 384 B from each) is set apart in the totals.
        fb = os.path.join(tmp, 'fb.hlo')
        with open(fb, 'w') as f:
            f.write('HloModule fb, num_partitions=4\n\nENTRY main {\n'
                    '  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n'
                    '  ROOT c = f32[8,16] custom-call(p), custom_call_target="CustomSPMDPartitioning",'
                    ' sharding={devices=[4,1]<=[4]}\n}\n')
        fbdir = os.path.join(tmp, 'fbout')
        run([shardlens, 'analyze', fb, '--out', fbdir])
        r, log = browse(os.path.join(fbdir, 'report.html'), tmp, 'p')
        check('1.50 KiBof it at 1 custom call partitioned by fallback' in r['totals'],
              'fallback traffic not in the totals: %r' % r['totals'])
        check(not r['errors'], 'fallback page console errors: %r' % r['errors'])

        # A diff: data_parallel against the MLP has new source ops.
        dp = os.path.join(tmp, 'dp')
        run([shardlens, 'analyze', os.path.join(src, 'samples', 'fsdp_allgather.hlo'), '--out', dp])
        diff = os.path.join(tmp, 'diff.html')
        run([shardlens, 'html', os.path.join(dp, 'trace.db'), db, '-o', diff])
        r, log = browse(diff, tmp, name)
        check(r['diffHidden'] is False, 'the diff section is hidden')
        check(r['diffNew'] > 0, 'the diff shows nothing new')
        check(r['rows'] == n_coll, 'diff page rows %r, collectives %d' % (r['rows'], n_coll))
        check(not r['errors'], 'diff page console errors: %r' % r['errors'])

        # A 12-layer transformer (about 1,000 instructions) starts collapsed into group boxes;
        # clicking boxes (the busiest first) down to a view with ops shows that group's ops.
        big = os.path.join(tmp, 'big.hlo')
        run([sys.executable, os.path.join(src, 'bench', 'gen_transformer.py'), '--layers', '12',
             '-o', big])
        bigdir = os.path.join(tmp, 'big')
        run([shardlens, 'analyze', big, '--out', bigdir])
        bdb = os.path.join(bigdir, 'trace.db')
        c, rid = latest_run(bdb)
        n_big = c.execute('SELECT COUNT(*) FROM collective WHERE run_id=?', (rid,)).fetchone()[0]
        bname = c.execute("SELECT name FROM instr WHERE run_id=? AND phase='before' AND "
                          "op_name LIKE '%layer_7/mlp/%' AND opcode='dot' ORDER BY id LIMIT 1",
                          (rid,)).fetchone()[0]
        r, log = browse(os.path.join(bigdir, 'report.html'), tmp, bname)
        check(r['rows'] == n_big, 'big page rows %r, collectives %d' % (r['rows'], n_big))
        D = page_data(os.path.join(bigdir, 'report.html'))
        check('too many to draw at once' in r['startNote'] and 'click a box to open it' in r['startNote'],
              'big page not collapsed into groups: %r' % r['startNote'])
        check(r['found'] == bname, 'big page search for %s found %r' % (bname, r['found']))
        check(10 <= r['hBoxes'] <= 60, 'big page opens with %r group boxes, not 10 to 60' % r['hBoxes'])
        T = D['trees']['after']
        leaf = unrle(T['leaf'])
        g = r.get('crumbGroup')
        check(r.get('opView') is not None and g is not None,
              'clicking group boxes %r reached no view of ops' % r.get('expandPath'))
        if r.get('opView') is not None and g is not None:
            want_ops = {'a%d' % (T['lo'] + i) for i, x in enumerate(leaf) if x == g}
            want_boxes = {'h%d' % x for x, p in enumerate(T['parent']) if p == g}
            got = set(r['opView'])
            check(want_ops and {t for t in got if t.startswith('a')} == want_ops,
                  'group %d shows ops %r, its ops are %r' % (g, sorted(got), sorted(want_ops)))
            check({t for t in got if t.startswith('h')} == want_boxes,
                  'group %d shows boxes %r, its groups are %r' % (g, sorted(got), sorted(want_boxes)))
            check(r['crumbs'] == len(r['expandPath']) + 1,
                  'breadcrumbs %r after %d clicks' % (r['crumbs'], len(r['expandPath'])))
        check(not r['errors'], 'big page console errors: %r' % r['errors'])
        # a group of the before view that was not drawn (past the page's diagram budget, made
        # small here), under drawn ones: its box opens a list of its instructions, and a link
        # selects one
        small = os.path.join(tmp, 'small.html')
        run([shardlens, 'html', bdb, '-o', small, '--layout-budget', '240'])
        B = page_data(small)['trees']['before']
        why = B['units_why'][1::2]
        undrawn = None
        for x in range(1, len(B['parent'])):
            chain, p = [], B['parent'][x]
            while p > 0 and why[p] == 0:
                chain.insert(0, p)
                p = B['parent'][p]
            if why[x] == 2 and p == 0:
                undrawn = chain + [x]
                break
        check(undrawn is not None, 'every before group of the big page was drawn; no list to test')
        if undrawn:
            r, log = browse(small, tmp, bname, undrawn)
            gx = undrawn[-1]
            members = B['members'][gx]
            check(r['list'] is not None, 'the undrawn group %d shows no list' % gx)
            if r['list']:
                check('not drawn' in r['list']['text'] and ('Its %d instructions' % members) in r['list']['text'],
                      'undrawn group %d says %r' % (gx, r['list']['text']))
                check(r['list']['rows'] == min(members, 2000),
                      'undrawn group %d lists %d rows, has %d instructions' % (gx, r['list']['rows'], members))
                bleaf = unrle(B['leaf'])
                first = r.get('listSelected')
                inside = False
                if first is not None and 0 <= int(first) - B['lo'] < len(bleaf):
                    x = bleaf[int(first) - B['lo']]
                    while x > 0 and x != gx:
                        x = B['parent'][x]
                    inside = x == gx
                check(inside, 'the list link selected %r, not an op of group %d' % (first, gx))
            check(not r['errors'], 'list page console errors: %r' % r['errors'])
        # the live-bytes chart marks the trace's peak (after partitioning, the first device set)
        peak = c.execute("SELECT peak_bytes FROM memory WHERE run_id=? AND phase='after' "
                         "ORDER BY id LIMIT 1", (rid,)).fetchone()[0]
        check(r['peak'] == peak and r['peakMax'] == peak,
              'chart peak %r (highest point %r), trace peak %d' % (r['peak'], r['peakMax'], peak))
        check(r['peakLabel'] and 'peak ' in r['peakLabel'], 'no peak label: %r' % r['peakLabel'])
        n_top = c.execute("SELECT COUNT(*) FROM memory_buffer b JOIN memory m ON m.id = b.memory_id "
                          "WHERE m.run_id=? AND m.phase='after' AND m.id = (SELECT MIN(id) FROM "
                          "memory WHERE run_id=? AND phase='after')", (rid, rid)).fetchone()[0]
        check(r['memTop'] == n_top, 'chart lists %r top buffers, the trace %d' % (r['memTop'], n_top))

        # Origins: the MLP with three shardings taken out (propagation fills them in); the page
        # shows for %maximum.7 the origin line explain prints.
        bare = os.path.join(tmp, 'bare.hlo')
        text = open(os.path.join(src, 'samples', 'mlp_megatron.hlo'), encoding='utf-8').read()
        text = '\n'.join(re.sub(r', sharding=\{devices=\[1,4\]<=\[4\]\}', '', line)
                         if re.search(r'dot\.4 |broadcast\.6|maximum\.7', line) else line
                         for line in text.split('\n'))
        open(bare, 'w', encoding='utf-8').write(text)
        bdir = os.path.join(tmp, 'bare')
        run([shardlens, 'analyze', bare, '--out', bdir])
        pdb = os.path.join(bdir, 'trace.db')
        want = run([shardlens, 'explain', pdb, 'maximum.7']).split('\n')[0]
        check(want.startswith('origin: %maximum.7 got '), 'explain gives no origin: %r' % want)
        r, log = browse(os.path.join(bdir, 'report.html'), tmp, 'maximum.7', (), 'maximum.7')
        check(r['origin'] == want, 'origin panel %r, explain %r' % (r['origin'], want))
        check(want in r['opText'], 'the selected op panel lacks the origin: %r' % r['opText'])
        check(not r['errors'], 'origin page console errors: %r' % r['errors'])

        # Bad input: exit 2, a FILE: error: line, and no page written.
        bad = subprocess.run([shardlens, 'html', os.path.join(tmp, 'missing.db'), '-o',
                              os.path.join(tmp, 'bad.html')], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        check(bad.returncode == 2 and 'missing.db: error:' in bad.stderr,
              'missing trace: exit %d, %r' % (bad.returncode, bad.stderr))
        check(not os.path.exists(os.path.join(tmp, 'bad.html')), 'a page for a missing trace')
        bad = subprocess.run([shardlens, 'html', db, '-o', os.path.join(tmp, 'bad.html'),
                              '--layout-budget', 'lots'], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        check(bad.returncode == 2 and '--layout-budget' in bad.stderr,
              'bad --layout-budget: exit %d, %r' % (bad.returncode, bad.stderr))
        check(not os.path.exists(os.path.join(tmp, 'bad.html')), 'a page for a bad option')
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        sys.exit('%d check(s) failed' % len(FAILS))
    print('html: all checks passed')


if __name__ == '__main__':
    main()
