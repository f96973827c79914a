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
generated transformer starts collapsed per op_name prefix, and clicking the boxes opens a
neighbourhood for a box holding one of the busiest source ops (the page carries 12); a missing trace is exit 2 with no page.
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
var boxes=[].slice.call(document.querySelectorAll('#graph g.node')).filter(function(n){
  var tt=n.querySelector('title');return tt && /^p/.test(tt.textContent);});
r.boxes=boxes.length;
for(var i=0;i<boxes.length;i++){boxes[i].dispatchEvent(new MouseEvent('click',{bubbles:true}));
  var said=q('#search-result').textContent;
  if(said.indexOf('expanded')===0){r.boxClick=said;r.boxNote=q('#graph-note').textContent;
    r.boxText=boxes[i].querySelector('text').textContent;
    r.boxHit=document.querySelectorAll('#graph .hit').length;break;}
  showAfter();}
function showAfter(){var b=document.querySelector('.tab[data-key=after]');if(b)b.click();
  boxes=[].slice.call(document.querySelectorAll('#graph g.node')).filter(function(n){
  var tt=n.querySelector('title');return tt && /^p/.test(tt.textContent);});}
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


def browse(page, tmp, name):
    """Loads `page` with the probe added; returns the probe's result and Chromium's log."""
    text = open(page, encoding='utf-8').read()
    probed = os.path.join(tmp, 'probed-' + os.path.basename(page))
    text = text.replace('<head>', '<head>' + PRELUDE, 1)
    text = text.replace('</body>', PROBE % {'name': json.dumps(name)} + '</body>', 1)
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

        # A 12-layer transformer (about 1,000 instructions) starts collapsed into op_name
        # boxes; clicking a box that holds one of the busiest source ops opens its neighbourhood
        # with the op selected.
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
        check('op_name prefix' in r['graphNote'], 'big page not collapsed: %r' % r['graphNote'])
        check(r['found'] == bname, 'big page search for %s found %r' % (bname, r['found']))
        check(r['boxes'] > 12, 'big page has %r op_name boxes' % r['boxes'])
        check((r.get('boxClick') or '').startswith('expanded: neighbourhood of %'),
              'clicking the op_name boxes expanded none: %r' % r.get('boxClick'))
        check(r.get('boxHit') == 1, 'the expanded neighbourhood does not select its op')
        check(not r['errors'], 'big page console errors: %r' % r['errors'])

        # Bad input: exit 2, a FILE: error: line, and no page written.
        bad = subprocess.run([shardlens, 'html', os.path.join(tmp, 'missing.db'), '-o',
                              os.path.join(tmp, 'bad.html')], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        check(bad.returncode == 2 and 'missing.db: error:' in bad.stderr,
              'missing trace: exit %d, %r' % (bad.returncode, bad.stderr))
        check(not os.path.exists(os.path.join(tmp, 'bad.html')), 'a page for a missing trace')
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        sys.exit('%d check(s) failed' % len(FAILS))
    print('html: all checks passed')


if __name__ == '__main__':
    main()
