/**
 * The two files Settings loads, served by this process (the CSP allows nothing else): a style
 * sheet readable from 375 px up, and the copy buttons. Everything works without the script but
 * copying, which is why the copy buttons start hidden.
 */
export const SETTINGS_CSS = `*,*::before,*::after{box-sizing:border-box}
html{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;line-height:1.5;color:#1b1f24;background:#fff}
body{margin:0}
.bar{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem 1rem;padding:.75rem 1rem;border-bottom:1px solid #d0d7de;background:#f6f8fa}
.bar nav{display:flex;gap:1rem;flex:1 1 auto}
.bar nav a{color:#0b4fa8;font-weight:600}
.bar nav a[aria-current=page]{color:#1b1f24;text-decoration-thickness:3px}
.bar form{margin:0}
.brand{font-weight:600}
.account{margin:0;color:#424a53}
.skip{position:absolute;left:-10000px}
.skip:focus{position:static}
main{max-width:72rem;margin:0 auto;padding:1rem;overflow-wrap:break-word}
h1{font-size:1.6rem;margin:.5rem 0 1rem}
h2{font-size:1.2rem;margin:1.5rem 0 .5rem}
a{color:#0b4fa8}
a:focus-visible,button:focus-visible,input:focus-visible,.table-wrap:focus-visible{outline:3px solid #1f6feb;outline-offset:2px}
.field{margin:.75rem 0}
.field label{display:block;font-weight:600}
input[type=text],input[type=url]{width:100%;max-width:36rem;padding:.5rem;font:inherit;border:1px solid #6e7781;border-radius:4px}
input[aria-invalid=true]{border-color:#b3261e}
fieldset{border:1px solid #d0d7de;border-radius:4px;margin:.75rem 0;padding:.5rem .75rem;max-width:36rem}
fieldset[aria-invalid=true]{border-color:#b3261e}
legend{font-weight:600;padding:0 .25rem}
.check{display:block;padding:.25rem 0}
.check input{width:1.1rem;height:1.1rem;vertical-align:middle;margin-right:.4rem}
button{font:inherit;padding:.5rem 1rem;border-radius:4px;border:1px solid #0b4fa8;background:#0b4fa8;color:#fff;cursor:pointer;min-height:2.5rem}
button.secondary{background:#fff;color:#0b4fa8}
button.danger{background:#fff;color:#a40e26;border-color:#a40e26}
.error{color:#b3261e;font-weight:600;margin:.25rem 0}
.notice{background:#ddf4ff;border:1px solid #54aeff;padding:.5rem .75rem;border-radius:4px}
.once{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem 1rem;border-radius:4px}
.secret{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center}
.secret code{word-break:break-all;background:#fff;padding:.25rem .5rem;border:1px solid #d4a72c;border-radius:4px}
.table-wrap{position:relative;overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;min-width:32rem}
th,td{text-align:left;vertical-align:top;padding:.4rem .5rem;border-bottom:1px solid #d0d7de}
td form{margin:0}
pre{white-space:pre-wrap;word-break:break-all;margin:0;max-width:28rem;font-size:.85rem}
code{font-size:.9rem;word-break:break-all}
.delivery{border:1px solid #d0d7de;border-radius:4px;padding:0 .75rem .75rem;margin:1rem 0}
.status-failed{color:#a40e26}
.status-delivered{color:#116329}
.meta{color:#424a53;margin:.25rem 0 .5rem}
.actions{display:flex;gap:1rem;align-items:center}
.pager{display:flex;gap:1.5rem;margin:1rem 0}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
`;

export const SETTINGS_JS = `'use strict';
(function () {
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.style.position = 'absolute';
      area.style.left = '-10000px';
      document.body.appendChild(area);
      area.select();
      var ok = document.execCommand('copy');
      document.body.removeChild(area);
      if (ok) resolve(); else reject(new Error('copy refused'));
    });
  }
  document.querySelectorAll('button[data-copy]').forEach(function (button) {
    var id = button.getAttribute('data-copy');
    var source = document.getElementById(id);
    var status = document.querySelector('[data-copy-status="' + id + '"]');
    if (!source) return;
    button.hidden = false;
    button.addEventListener('click', function () {
      copyText(source.textContent).then(function () {
        if (status) status.textContent = 'Copied to the clipboard.';
      }, function () {
        if (status) status.textContent = 'Copying failed: select the text and copy it.';
      });
    });
  });
})();
`;
