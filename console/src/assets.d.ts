// Style sheets are bundled by esbuild into app.css; they export nothing.
declare module "*.css";
