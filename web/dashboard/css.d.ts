/** Style sheets imported for esbuild to bundle into app.css. */
declare module '*.css'
