import { Router } from 'express';
import { openApiDocument } from './document.js';

/** Serialized once: the document is fixed for the life of the process. */
const DOCUMENT_JSON = JSON.stringify(openApiDocument);

/** GET /openapi.json: the document, without a key and outside the rate limit (mounted before /api/v1). */
export function openApiRoutes(): Router {
  const router = Router();
  router.get('/openapi.json', (_req, res) => {
    res.type('application/json').set('Cache-Control', 'no-cache').send(DOCUMENT_JSON);
  });
  return router;
}
