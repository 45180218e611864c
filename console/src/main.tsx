import { render } from 'preact';
import { App } from './app.tsx';
import { prefetchOverview } from './pages/overview.tsx';
import { current } from './router.tsx';
import './styles.css';

if (current().path === '/') prefetchOverview();

render(<App />, document.getElementById('app')!);
