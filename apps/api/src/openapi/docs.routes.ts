import { createRequire } from 'node:module';
import path from 'node:path';
import { NotFoundError } from '@svc/core';
import { Router } from 'express';

/** swagger-ui-dist's directory, found the way Node finds the package, so it is always the installed copy. */
const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The renderer's files the page loads: nothing else of the package is reachable (not its petstore demo). */
const RENDERER_FILES = new Set(['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-32x32.png']);

/**
 * Starts the renderer on our document. validatorUrl null: Swagger UI would otherwise send the
 * document to validator.swagger.io, which is neither private nor reachable offline.
 *
 * Swagger UI shows no `x-codeSamples` itself: the plugin below wraps the parameters section of
 * each operation (drawn only once the operation is expanded) and puts the operation's samples
 * above it, with Swagger UI's own React (no build step, nothing loaded from elsewhere).
 */
const INIT_SCRIPT = `window.addEventListener('load', function () {
  function CodeSamplesPlugin(system) {
    var h = system.React.createElement;
    function CodeSamples(props) {
      return h('section', { className: 'code-samples', 'aria-label': 'Code samples' },
        h('div', { className: 'opblock-section-header' }, h('h4', { className: 'opblock-title' }, 'Code samples')),
        h('div', { className: 'code-samples__list', style: { padding: '8px 20px' } },
          props.samples.map(function (sample, index) {
            return h('div', { key: index, className: 'code-sample', 'data-lang': sample.lang },
              h('h5', { className: 'code-sample__label', style: { margin: '8px 0 4px' } }, sample.label),
              h('pre', { className: 'microlight code-sample__source', tabIndex: 0 }, h('code', null, sample.source)));
          })));
    }
    return {
      wrapComponents: {
        parameters: function (Original) {
          return function (props) {
            var samples = props.operation && props.operation.get('x-codeSamples');
            var list = samples && samples.toJS ? samples.toJS() : [];
            if (list.length === 0) return h(Original, props);
            return h('div', null, h(CodeSamples, { samples: list }), h(Original, props));
          };
        }
      }
    };
  }

  window.ui = SwaggerUIBundle({
    url: '/openapi.json',
    dom_id: '#reference',
    validatorUrl: null,
    deepLinking: true,
    docExpansion: 'list',
    defaultModelsExpandDepth: 0,
    tryItOutEnabled: false,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [CodeSamplesPlugin],
    layout: 'BaseLayout'
  });
});
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Site Visibility Service API reference</title>
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <noscript>This reference needs JavaScript; the document itself is at <a href="/openapi.json">/openapi.json</a>.</noscript>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/docs-init.js"></script>
</body>
</html>
`;

/**
 * The page may load only from this origin: the browser itself then refuses anything from a CDN.
 * Swagger UI sets inline styles and draws icons from data: URLs.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * GET /docs: the HTML reference rendered from /openapi.json by Swagger UI (docs/adr/0006), with
 * every file served by this process: it works with no internet. No key, no rate limit.
 */
export function docsRoutes(): Router {
  const router = Router();
  router.get('/docs', (_req, res) => {
    res.type('html').set({ 'Cache-Control': 'no-cache', 'Content-Security-Policy': CONTENT_SECURITY_POLICY }).send(PAGE);
  });
  router.get('/docs/assets/docs-init.js', (_req, res) => {
    res.type('application/javascript').set('Cache-Control', 'no-cache').send(INIT_SCRIPT);
  });
  router.get('/docs/assets/:file', (req, res, next) => {
    const file = String(req.params.file);
    if (!RENDERER_FILES.has(file)) throw new NotFoundError(`No file ${file} in the API reference.`);
    res.sendFile(file, { root: SWAGGER_UI_DIR, maxAge: '1h' }, (error) => {
      if (error) next(error);
    });
  });
  return router;
}
