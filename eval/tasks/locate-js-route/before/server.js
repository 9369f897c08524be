const app = require('./app');

const port = Number(process.env.PORT) || 3100;

app.listen(port, () => {
  console.log(`tasklist-api listening on :${port}`);
});
